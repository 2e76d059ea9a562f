package xdsconfig

import (
	"fmt"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/sluicehq/sluice/internal/config"
)

// TypeURL is the xDS resource type Sluice subscribes to, as
// envoyproxy/ratelimit's xDS provider does.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// DefaultMaxBytes is the default of Limits.Bytes: about 2.5 times what a
// version at the default descriptor bound takes (100 MB), so that it binds
// only on a form that costs far more than its descriptors, such as a huge
// replaces list or long values.
const DefaultMaxBytes = 256 << 20

// Limits bound what one version may cost: its descriptors and their depth,
// as config.Limits bounds files, and the bytes of its decoded form. A
// version past one is rejected (NACKed) with the bound and the value it
// reached, and the configuration in force stays. Zero fields take the
// defaults.
type Limits struct {
	// Descriptors bounds the descriptors of every resource together
	// (config.DefaultMaxDescriptors).
	Descriptors int
	// Depth bounds how deep descriptors nest (config.DefaultMaxDepth).
	Depth int
	// Bytes bounds the size of the version's decoded form, the YAML tree
	// the parser reads: its nodes and the bytes of its strings, about 1 KB
	// per descriptor plus its key and value (DefaultMaxBytes).
	Bytes int64
}

func (l Limits) withDefaults() Limits {
	c := config.Limits{Descriptors: l.Descriptors, Depth: l.Depth}.WithDefaults()
	l.Descriptors, l.Depth = c.Descriptors, c.Depth
	if l.Bytes <= 0 {
		l.Bytes = DefaultMaxBytes
	}
	return l
}

// Convert decodes one state-of-the-world set of RateLimitConfig resources
// within lim and validates it as a set of configuration files: each
// resource is one envoyproxy/ratelimit file, read by the same parser, so a
// limit means exactly what it would in a file. Problems name the resource
// as xds:NAME. An empty set is an empty configuration.
func Convert(resources []*anypb.Any, lim Limits) (*config.Config, error) {
	d := newDecoder(lim)
	docs := make([]config.Document, 0, len(resources))
	for i, res := range resources {
		if res.GetTypeUrl() != TypeURL {
			return nil, fmt.Errorf("resource %d has type %q, want %s", i, res.GetTypeUrl(), TypeURL)
		}
		root, name, err := d.config(res.GetValue())
		if err != nil {
			return nil, fmt.Errorf("resource %d: %w", i, err)
		}
		docs = append(docs, config.Document{Source: sourceName(name, i), Root: root})
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	return config.Limits{Descriptors: d.lim.Descriptors, Depth: d.lim.Depth}.ParseDocuments(docs...)
}

// sourceName names a resource in problems; a nameless one by its index.
func sourceName(name string, i int) string {
	if name == "" {
		return fmt.Sprintf("xds:#%d", i)
	}
	return "xds:" + name
}

// The field names, and the values that recur, are one node each, shared by
// every mapping: the parser only reads the tree. A version of many
// descriptors then costs a few nodes per descriptor rather than a dozen.
var (
	keyDomain, keyDescriptors, keyKey, keyValue = fixed("domain"), fixed("descriptors"), fixed("key"), fixed("value")
	keyRateLimit, keyShadowMode                 = fixed("rate_limit"), fixed("shadow_mode")
	keyDetailedMetric, keyQuotaMode             = fixed("detailed_metric"), fixed("quota_mode")
	keyUnlimited, keyUnit, keyRequestsPerUnit   = fixed("unlimited"), fixed("unit"), fixed("requests_per_unit")
	keyName, keyReplaces                        = fixed("name"), fixed("replaces")
	nodeTrue                                    = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"}
	unitNodes                                   = func() map[int32]*yaml.Node {
		m := map[int32]*yaml.Node{}
		for v, name := range rlsconf.RateLimitUnit_name {
			// The parser matches unit names case-insensitively, as ratelimit does.
			m[v] = fixed(name)
		}
		return m
	}()
)

func fixed(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// node returns a new node, from a block: the garbage collector then handles
// a version's nodes as a few objects instead of one each.
func (d *decoder) node() *yaml.Node {
	if len(d.free) == 0 {
		d.free = make([]yaml.Node, 256)
	}
	n := &d.free[0]
	d.free = d.free[1:]
	return n
}

// mapping is an empty mapping with room for fields fields.
func (d *decoder) mapping(fields int) *yaml.Node {
	m := d.node()
	m.Kind, m.Tag, m.Content = yaml.MappingNode, "!!map", make([]*yaml.Node, 0, 2*fields)
	return m
}

func (d *decoder) list(items []*yaml.Node) *yaml.Node {
	l := d.node()
	l.Kind, l.Tag, l.Content = yaml.SequenceNode, "!!seq", items
	return l
}

func (d *decoder) scalar(tag, value string) *yaml.Node {
	n := d.node()
	n.Kind, n.Tag, n.Value = yaml.ScalarNode, tag, value
	return n
}

func (d *decoder) addStr(m, key *yaml.Node, value string) { add(m, key, d.scalar("!!str", value)) }

func add(m, key, v *yaml.Node) { m.Content = append(m.Content, key, v) }

func addTrue(m, key *yaml.Node, set bool) {
	if set {
		add(m, key, nodeTrue)
	}
}
