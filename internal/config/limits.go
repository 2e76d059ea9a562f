package config

import "go.yaml.in/yaml/v3"

// Defaults of Limits.
const (
	// DefaultMaxDescriptors is ten times the descriptors of a large real
	// deployment, and what a node applies in about a second.
	DefaultMaxDescriptors = 100_000
	// DefaultMaxDepth: real trees are a few levels deep.
	DefaultMaxDepth = 64
	// MaxDepthLimit is the most Limits.Depth may be.
	MaxDepthLimit = 1000
)

// Limits bound what one configuration may define: the files of one Load
// together, or the documents of one ParseDocuments (one version from an xDS
// server). Past a bound the configuration is refused with a problem naming
// the bound, and the parser reads no further descriptors: a huge
// configuration costs little to refuse. Zero fields take the defaults.
type Limits struct {
	// Descriptors bounds the Envoy descriptors of every domain together
	// (DefaultMaxDescriptors; sluice serve --max-descriptors).
	Descriptors int
	// Depth bounds how deep descriptors nest, a top-level descriptor being
	// at depth 1 (DefaultMaxDepth, at most MaxDepthLimit; sluice serve
	// --max-descriptor-depth).
	Depth int
}

// WithDefaults returns l with its zero fields set to the defaults, and
// Depth capped at MaxDepthLimit.
func (l Limits) WithDefaults() Limits {
	if l.Descriptors <= 0 {
		l.Descriptors = DefaultMaxDescriptors
	}
	if l.Depth <= 0 {
		l.Depth = DefaultMaxDepth
	}
	l.Depth = min(l.Depth, MaxDepthLimit)
	return l
}

// Load is the package's Load within l.
func (l Limits) Load(paths ...string) (*Config, error) { return load(l.budget(), paths) }

// ParseDocuments is the package's ParseDocuments within l.
func (l Limits) ParseDocuments(docs ...Document) (*Config, error) {
	return parseDocuments(l.budget(), docs)
}

// budget counts what one configuration has defined so far against its
// Limits; the files of one load share it.
type budget struct {
	Limits
	descriptors int
	over        bool // a bound was reported: read no more descriptors
}

func (l Limits) budget() *budget { return &budget{Limits: l.WithDefaults()} }

// descriptor counts one more descriptor, read at n; false, once reported,
// when it is one too many.
func (b *budget) descriptor(p *fileParser, n *yaml.Node, path string) bool {
	if b.over {
		return false
	}
	if b.descriptors++; b.descriptors > b.Descriptors {
		p.errorf(n, path, "more than %d descriptors in one configuration, the bound (--max-descriptors): "+
			"no more are read", b.Descriptors)
		b.over = true
		return false
	}
	return true
}

// deeper reports whether descriptors at depth are too deep, reporting it.
func (b *budget) deeper(p *fileParser, n *yaml.Node, path string, depth int) bool {
	if depth <= b.Depth {
		return false
	}
	p.errorf(n, path, "descriptors nest deeper than %d levels, the bound (--max-descriptor-depth)", b.Depth)
	return true
}
