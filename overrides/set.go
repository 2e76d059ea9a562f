package overrides

import (
	"cmp"
	"slices"
	"time"
)

// Set is an immutable snapshot of every override, indexed for the hot path.
// The zero value and nil hold none.
type Set struct {
	policies map[string]*policySet
	total    int
}

// policySet is one policy's overrides.
type policySet struct {
	exact    map[string]*Override
	prefixes map[string]*Override
	// lengths are the prefixes' distinct lengths, longest first: a lookup
	// tries the key's own prefixes of these lengths only.
	lengths []int
	count   int
}

// NewSet indexes list; later entries replace earlier ones with the same
// policy and target. It copies what it keeps.
func NewSet(list []Override) *Set {
	s := &Set{policies: map[string]*policySet{}}
	for i := range list {
		o := list[i]
		ps := s.policies[o.Policy]
		if ps == nil {
			ps = &policySet{exact: map[string]*Override{}, prefixes: map[string]*Override{}}
			s.policies[o.Policy] = ps
		}
		m := ps.exact
		if o.Prefix != "" {
			m = ps.prefixes
		}
		target := o.Key + o.Prefix
		if _, dup := m[target]; !dup {
			ps.count++
			s.total++
		}
		m[target] = &o
	}
	for _, ps := range s.policies {
		for p := range ps.prefixes {
			if !slices.Contains(ps.lengths, len(p)) {
				ps.lengths = append(ps.lengths, len(p))
			}
		}
		slices.SortFunc(ps.lengths, func(a, b int) int { return cmp.Compare(b, a) })
	}
	return s
}

// Has reports whether policy has any override: the hot path asks this
// first, so policies without overrides cost one map lookup.
func (s *Set) Has(policy string) bool {
	return s != nil && s.policies[policy] != nil
}

// Lookup returns the override that applies to (policy, key) at now, or nil:
// the key's own override, else the one of its longest prefix that has one;
// an expired override is passed over as if it were not there.
func (s *Set) Lookup(policy, key string, now time.Time) *Override {
	if s == nil {
		return nil
	}
	ps := s.policies[policy]
	if ps == nil {
		return nil
	}
	if o := ps.exact[key]; o != nil && !o.Expired(now) {
		return o
	}
	for _, n := range ps.lengths {
		if n > len(key) {
			continue
		}
		if o := ps.prefixes[key[:n]]; o != nil && !o.Expired(now) {
			return o
		}
	}
	return nil
}

// Len is the number of overrides, expired ones included.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return s.total
}

// Count is the number of overrides of policy.
func (s *Set) Count(policy string) int {
	if s == nil || s.policies[policy] == nil {
		return 0
	}
	return s.policies[policy].count
}

// List returns the overrides of policy, or of every policy when policy is
// "", sorted by policy then target, expired ones left out.
func (s *Set) List(policy string, now time.Time) []Override {
	var out []Override
	if s == nil {
		return out
	}
	for name, ps := range s.policies {
		if policy != "" && name != policy {
			continue
		}
		for _, m := range []map[string]*Override{ps.exact, ps.prefixes} {
			for _, o := range m {
				if !o.Expired(now) {
					out = append(out, *o)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Override) int {
		return cmp.Or(cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Target(), b.Target()))
	})
	return out
}

// policyNames lists the policies with overrides.
func (s *Set) policyNames() []string {
	var out []string
	if s != nil {
		for name := range s.policies {
			out = append(out, name)
		}
	}
	return out
}
