package config

import (
	"fmt"
	"maps"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Document is a configuration document held in memory as a YAML tree rather
// than read from a file, such as one built from an xDS resource.
type Document struct {
	// Source names the document in problems and in Config.Files.
	Source string
	// Root is the document's top node: a mapping in either file format.
	Root *yaml.Node
}

// ParseDocuments is Load for documents in memory: each is read as a file
// would be, with the same validation, and they are merged by the same rules.
// A tree built in code has no line numbers, so problems locate a field by
// its path alone.
func ParseDocuments(docs ...Document) (*Config, error) { return Limits{}.ParseDocuments(docs...) }

func parseDocuments(b *budget, docs []Document) (*Config, error) {
	ps := &problems{}
	files := make([]*parsed, 0, len(docs))
	names := make([]string, 0, len(docs))
	for _, d := range docs {
		names = append(names, d.Source)
		p := &fileParser{file: d.Source, out: ps, budget: b}
		if d.Root == nil || isNull(d.Root) {
			p.errorf(nil, "", "document is empty")
			continue
		}
		if f := parseRoot(p, d.Root); f != nil {
			files = append(files, f)
		}
	}
	return finish(files, ps, names)
}

// Overlay returns base with top's domains and policies added. A domain
// defined in both is top's: base's definition and the limits on its tree are
// dropped. Any other policy name in both is an error, as between two files,
// and so is a store or proxy section in top. base and top are not modified.
func Overlay(base, top *Config) (*Config, error) {
	out := *base
	out.Policies = make(map[string]*Policy, len(base.Policies)+len(top.Policies))
	maps.Copy(out.Policies, base.Policies)
	out.Domains = maps.Clone(base.Domains)
	out.Files = append(append([]string(nil), base.Files...), top.Files...)
	ps := &problems{}
	if top.Store != (Store{}) || top.Proxy != nil {
		ps.add(Problem{File: strings.Join(top.Files, ", "), Message: "a dynamic configuration cannot set the store or proxy section"})
	}
	for name, d := range top.Domains {
		if old := out.Domains[name]; old != nil {
			forEachLimit(old.Descriptors, func(p *Policy) { delete(out.Policies, p.Name) })
		}
		out.Domains[name] = d
	}
	for name, p := range top.Policies {
		if prev := out.Policies[name]; prev != nil {
			ps.add(Problem{File: p.File, Field: name, Message: fmt.Sprintf(
				"policy name %q is already used at %s; policy names must be unique across all sources",
				name, location(prev.File, prev.Line))})
			continue
		}
		out.Policies[name] = p
	}
	if err := ps.err(out.Files); err != nil {
		return nil, err
	}
	return &out, nil
}

// forEachLimit calls f for every limit on a descriptor tree.
func forEachLimit(level []*Descriptor, f func(*Policy)) {
	for _, d := range level {
		for _, p := range d.Limits {
			f(p)
		}
		forEachLimit(d.Children, f)
	}
}

// location is file:line, or the file alone for a document without lines.
func location(file string, line int) string {
	if line == 0 {
		return file
	}
	return fmt.Sprintf("%s:%d", file, line)
}
