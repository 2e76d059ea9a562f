package config

import "strings"

// Match finds the limits for one request descriptor in domain, the way
// envoyproxy/ratelimit does: at each level an entry matches, in order of
// preference, a node with the same key and value, the first node (in file
// order) with the same key and a glob value the value matches, or a node with
// the same key and no value. The limits apply only when every entry matched
// and the last node carries them, or when every entry but the last matched
// and the last names the plan of the node reached (Descriptor.PlanKey). An
// unknown domain matches nothing.
func (c *Config) Match(domain string, entries []Entry) Match {
	return c.match(domain, entries, false)
}

// MatchShared is Match, and also writes, in place, the glob of each node
// with Shared (share_threshold) over the value of the entry it matched: the
// values then make the store key that those entries share.
func (c *Config) MatchShared(domain string, entries []Entry) Match {
	return c.match(domain, entries, true)
}

func (c *Config) match(domain string, entries []Entry, share bool) Match {
	d := c.Domains[domain]
	if d == nil || len(entries) == 0 {
		return Match{}
	}
	level, index := d.Descriptors, d.index
	var node *Descriptor
	for i, e := range entries {
		var next *Descriptor
		if index != nil {
			next = index.match(e)
		} else {
			next = matchLevel(level, e)
		}
		if next == nil && node != nil && i == len(entries)-1 && node.PlanKey != "" && e.Key == node.PlanKey {
			// The last entry names the plan of the limits reached so far.
			return Match{Limits: node.Limits, Plan: e.Value, PlanEntry: true}
		}
		if node = next; node == nil {
			return Match{}
		}
		if share && node.Shared {
			entries[i].Value = node.Value
		}
		level, index = node.Children, node.index
	}
	return Match{Limits: node.Limits, Unlimited: node.Unlimited}
}

// MatchLevel is the node of one level of a domain's tree that e matches, by
// Match's preference (exact value, first glob, default), or nil.
func MatchLevel(level []*Descriptor, e Entry) *Descriptor { return matchLevel(level, e) }

// matchLevel finds the node of level that e matches by scanning it; a
// levelIndex finds the same one without.
func matchLevel(level []*Descriptor, e Entry) *Descriptor {
	var wildcard, def *Descriptor
	for _, n := range level {
		if n.Key != e.Key {
			continue
		}
		switch {
		case n.Value == "":
			if def == nil {
				def = n
			}
		case n.Value == e.Value:
			return n
		case wildcard == nil && strings.Contains(n.Value, "*") && Glob(n.Value, e.Value):
			wildcard = n
		}
	}
	if wildcard != nil {
		return wildcard
	}
	return def
}

// Glob reports whether value matches pattern, in which each '*' stands for
// any run of bytes (none included) and every other byte for itself. It runs
// in O(len(pattern) × len(value)) at worst, with no recursion.
func Glob(pattern, value string) bool {
	// Greedy with one backtrack point: the last '*' seen absorbs one more
	// byte each time the rest fails to match.
	p, v := 0, 0
	star, mark := -1, 0
	for v < len(value) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, v
			p++
		case p < len(pattern) && pattern[p] == value[v]:
			p++
			v++
		case star >= 0:
			p = star + 1
			mark++
			v = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// indexFrom is the smallest level that gets a levelIndex: below it a scan is
// as fast.
const indexFrom = 4

// levelIndex finds the node of one level of a tree that an entry matches
// (see matchLevel) in time independent of the level's size, but for globs:
// a level of many descriptors, such as one per user, would otherwise cost a
// scan of all of them per request.
type levelIndex struct{ byKey map[string]*keyNodes }

// keyNodes are the nodes of one key on a level, by the way they match.
type keyNodes struct {
	exact map[string]*Descriptor // by value, globs included: an equal value wins over a glob
	globs []*Descriptor          // values with a *, in file order
	any   *Descriptor            // the first node without a value
}

// indexLevel returns the index of level, or nil when level is small.
func indexLevel(level []*Descriptor) *levelIndex {
	if len(level) < indexFrom {
		return nil
	}
	x := &levelIndex{byKey: map[string]*keyNodes{}}
	for _, n := range level {
		k := x.byKey[n.Key]
		if k == nil {
			k = &keyNodes{exact: map[string]*Descriptor{}}
			x.byKey[n.Key] = k
		}
		switch {
		case n.Value == "":
			if k.any == nil {
				k.any = n
			}
		default:
			if _, dup := k.exact[n.Value]; !dup {
				k.exact[n.Value] = n
			}
			if strings.Contains(n.Value, "*") {
				k.globs = append(k.globs, n)
			}
		}
	}
	return x
}

// match is matchLevel over the indexed level.
func (x *levelIndex) match(e Entry) *Descriptor {
	k := x.byKey[e.Key]
	if k == nil {
		return nil
	}
	if n := k.exact[e.Value]; n != nil {
		return n
	}
	for _, n := range k.globs {
		if Glob(n.Value, e.Value) {
			return n
		}
	}
	return k.any
}
