package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/suggest"
)

// maxFileSize is the largest configuration file accepted: far above any real
// configuration, low enough that a wrong path (a log, a binary) fails fast
// instead of being parsed.
const maxFileSize = 4 << 20

// syntaxLine splits yaml.v3's "yaml: line N: message" errors so that syntax
// errors carry a line like every other problem.
var syntaxLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document parses data, which must hold exactly one YAML document, and returns
// the document's top node; nil after reporting why not.
func (p *fileParser) document(data []byte) *yaml.Node {
	if len(data) > maxFileSize {
		p.errorf(nil, "", "file is %d bytes, larger than the maximum %d (4 MiB)", len(data), maxFileSize)
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.errorf(nil, "", "file is empty")
		} else {
			p.syntaxError(err, data)
		}
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		// A second document that does not even parse: say what matters.
		p.errorf(nil, "", "file holds more than one YAML document; a configuration file holds exactly one")
		return nil
	default:
		p.errorf(&next, "", "a second YAML document starts here; a configuration file holds exactly one (remove the extra ---)")
		return nil
	}
	// yaml.v3 checks aliases (self-reference, "billion laughs" expansion)
	// only when decoding to Go values; do that once so that the walk below,
	// which follows aliases, is bounded.
	var discard any
	if err := doc.Decode(&discard); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) { // type errors are duplicate keys: reported with paths below
			p.syntaxError(err, data)
			return nil
		}
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		p.errorf(nil, "", "file is empty")
		return nil
	}
	return doc.Content[0]
}

func (p *fileParser) syntaxError(err error, data []byte) {
	msg := err.Error()
	if m := syntaxLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if tabbed := tabIndented(m[2], data, line); tabbed > 0 {
			p.errorf(&yaml.Node{Line: tabbed}, "", "invalid YAML: a tab indents this line; indent with spaces, YAML does not allow tabs for indentation")
			return
		}
		p.errorf(&yaml.Node{Line: line}, "", "invalid YAML: %s", m[2])
		return
	}
	p.errorf(nil, "", "invalid YAML: %s", strings.TrimPrefix(msg, "yaml: "))
}

// tabIndented returns the line a tab indents when yaml.v3's message is about
// one ("found character that cannot start any token", "found a tab character
// that violates indentation", which do not say what to do); 0 otherwise.
// yaml.v3 may name the line before the tab's, so the search starts there.
func tabIndented(msg string, data []byte, line int) int {
	if !strings.Contains(msg, "tab character") && !strings.Contains(msg, "cannot start any token") {
		return 0
	}
	lines := bytes.Split(data, []byte("\n"))
	for i := max(line, 1); i <= len(lines) && i <= line+1; i++ {
		if indent := bytes.TrimLeft(lines[i-1], " "); len(indent) > 0 && indent[0] == '\t' {
			return i
		}
	}
	return 0
}

// deref follows aliases, so an anchored block can be reused like a copy.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names a node's type and value for "got ..." in messages.
func describe(n *yaml.Node) string {
	n = deref(n)
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	switch n.ShortTag() {
	case "!!null":
		return "null"
	case "!!int":
		return "the integer " + v
	case "!!float":
		return "the number " + v
	case "!!bool":
		return "the boolean " + v
	}
	return "the string " + strconv.Quote(v)
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// fields holds a mapping's values by key, plus where the mapping is, so that
// "missing field" problems can point at it.
type fields struct {
	node *yaml.Node
	path string
	set  []field // in the mapping's order; a handful, so a list beats a map
}

// field is one field of a mapping.
type field struct {
	name string
	key  *yaml.Node // the key node, for problems about the key itself
	val  *yaml.Node // the value node, aliases resolved
}

// key returns the key node of name, or nil when the mapping has no such
// field.
func (f *fields) key(name string) *yaml.Node {
	for i := range f.set {
		if f.set[i].name == name {
			return f.set[i].key
		}
	}
	return nil
}

// get returns the value of key, or nil when the key is absent or null: like
// envoyproxy/ratelimit (yaml.v2), a null value counts as not set.
func (f *fields) get(key string) *yaml.Node {
	for i := range f.set {
		if f.set[i].name == key {
			if v := f.set[i].val; !isNull(v) {
				return v
			}
			return nil
		}
	}
	return nil
}

// has reports whether key is set to something other than null.
func (f *fields) has(key string) bool { return f.get(key) != nil }

// mapping reads n as a mapping whose keys must be among allowed, reporting
// a wrong type, duplicate keys and unknown keys (with the allowed list, as
// the fix is usually a typo). ok is false when n is not a mapping at all.
func (p *fileParser) mapping(n *yaml.Node, path string, allowed ...string) (f *fields, ok bool) {
	return p.mappingHint(n, path, "", allowed...)
}

// mappingHint is mapping with a hint appended to unknown-field messages.
func (p *fileParser) mappingHint(n *yaml.Node, path, hint string, allowed ...string) (f *fields, ok bool) {
	n = deref(n)
	f = &fields{node: n, path: path}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, path, "must be a mapping, got %s", describe(n))
		return f, false
	}
	f.set = make([]field, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, path, "field names must be plain strings, got %s", describe(k))
			continue
		}
		name := k.Value
		switch first := f.key(name); {
		case name == "<<" && k.ShortTag() == "!!merge":
			p.errorf(k, join(path, name), "YAML merge keys (<<) are not supported; write the fields out (an alias *name for a whole block works)")
		case first != nil:
			p.errorf(k, join(path, name), "duplicate field (first set at line %d)", first.Line)
		case !contains(allowed, name):
			guess := ""
			if s := closest(name, allowed); s != "" {
				guess = fmt.Sprintf(" (did you mean %s?)", s)
			}
			p.errorf(k, join(path, name), "unknown field%s; allowed here: %s%s", guess, strings.Join(allowed, ", "), hint)
		default:
			f.set = append(f.set, field{name: name, key: k, val: deref(v)})
		}
	}
	return f, true
}

// list reads n as a sequence; ok is false after reporting when it is not one.
func (p *fileParser) list(n *yaml.Node, path, of string) ([]*yaml.Node, bool) {
	n = deref(n)
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, path, "must be a list of %s, got %s", of, describe(n))
		return nil, false
	}
	return n.Content, true
}

// missing reports that required field key is not set in f.
func (p *fileParser) missing(f *fields, key, want string) {
	if k := f.key(key); k != nil {
		p.errorf(k, join(f.path, key), "required field has no value; want %s", want)
		return
	}
	p.errorf(f.node, join(f.path, key), "required field is missing; want %s", want)
}

// need reports whether required field key is set, reporting it when not.
func (p *fileParser) need(f *fields, key, want string) bool {
	if f.has(key) {
		return true
	}
	p.missing(f, key, want)
	return false
}

// str reads a scalar as text. Any scalar is accepted, as ratelimit's yaml.v2
// does (value: 500 is the string "500"), but not a list or a mapping.
func (p *fileParser) str(f *fields, key string) (string, bool) {
	n := f.get(key)
	if n == nil {
		return "", false
	}
	if n.Kind != yaml.ScalarNode {
		p.errorf(n, join(f.path, key), "must be a string, got %s", describe(n))
		return "", false
	}
	return n.Value, true
}

// integer reads a whole number; a float such as 1.5 is an error rather than
// being truncated, which yaml.v3 would otherwise do.
func (p *fileParser) integer(f *fields, key string) (int64, bool) {
	n := f.get(key)
	if n == nil {
		return 0, false
	}
	if n.Kind == yaml.ScalarNode && plainDecimal(n.Value) && n.ShortTag() == "!!int" {
		if v, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			return v, true // what Decode gives, without its decoder and reflection per number
		}
	}
	var v int64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		p.errorf(n, join(f.path, key), "must be a whole number, got %s", describe(n))
		return 0, false
	}
	return v, true
}

// plainDecimal reports whether s is a decimal number without sign or
// leading zero, which every YAML integer syntax reads alike.
func plainDecimal(s string) bool {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// boolean reads true or false (and YAML 1.1's yes/no/on/off, which
// envoyproxy/ratelimit's yaml.v2 accepts).
func (p *fileParser) boolean(f *fields, key string) (bool, bool) {
	n := f.get(key)
	if n == nil {
		return false, false
	}
	var v bool
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
		p.errorf(n, join(f.path, key), "must be true or false, got %s", describe(n))
		return false, false
	}
	return v, true
}

// optBool reads an optional boolean: v is false when the field is not set,
// ok is false when it is set to something else than a boolean.
func (p *fileParser) optBool(f *fields, key string) (v, ok bool) {
	v, set := p.boolean(f, key)
	return v, set || !f.has(key)
}

// duration reads a Go duration string such as "1m" or "250ms".
func (p *fileParser) duration(f *fields, key string) (time.Duration, bool) {
	n := f.get(key)
	if n == nil {
		return 0, false
	}
	var d time.Duration
	err := errors.New("")
	if n.Kind == yaml.ScalarNode {
		d, err = time.ParseDuration(n.Value)
	}
	if err != nil {
		p.errorf(n, join(f.path, key), `must be a Go duration such as "1m", "1h30m" or "250ms", got %s`, describe(n))
		return 0, false
	}
	return d, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// closest returns the candidate within two edits of s, for "did you mean".
func closest(s string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance, giving up (returning 3) on
// strings too far apart in length to be typos of each other.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 || len(a)-len(b) > 2 || len(b)-len(a) > 2 {
		return 3
	}
	return suggest.Distance(a, b)
}
