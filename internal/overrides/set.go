package overrides

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// Set is an immutable snapshot of every override, indexed for the hot path.
// The zero value and nil hold none.
type Set struct {
	policies map[string]*policySet
	total    int
	next     time.Time // the soonest expiry; zero when none expires
}

// policySet is one policy's overrides.
type policySet struct {
	exact    map[string]*Override
	prefixes map[string]*Override
	// lengths are the prefixes' distinct lengths, longest first: a lookup
	// tries the key's own prefixes of these lengths only.
	lengths []int
	next    time.Time // the soonest expiry; zero when none expires
}

// NewSet indexes list; later entries replace earlier ones with the same
// policy and target. It copies what it keeps.
func NewSet(list []Override) *Set {
	changes := make([]change, len(list))
	for i, o := range list {
		changes[i] = change{o: o}
	}
	return (*Set)(nil).with(changes, time.Time{})
}

// with returns s with changes made, in order, and the overrides expired at
// now left out. It shares the policies it does not change with s, so a
// change costs the size of its policy, not of every override.
func (s *Set) with(changes []change, now time.Time) *Set {
	out := &Set{policies: map[string]*policySet{}}
	edited := map[string]*policySet{}
	edit := func(name string) *policySet {
		ps := edited[name]
		if ps == nil {
			ps = &policySet{exact: map[string]*Override{}, prefixes: map[string]*Override{}}
			if old := out.policies[name]; old != nil {
				maps.Copy(ps.exact, old.exact)
				maps.Copy(ps.prefixes, old.prefixes)
			}
			edited[name] = ps
		}
		return ps
	}
	if s != nil {
		for name, ps := range s.policies {
			out.policies[name] = ps
			if expired(ps.next, now) {
				edit(name)
			}
		}
	}
	for _, c := range changes {
		ps := edit(c.o.Policy)
		m, target := ps.exact, c.o.Key
		if c.o.Prefix != "" {
			m, target = ps.prefixes, c.o.Prefix
		}
		if c.removed {
			delete(m, target)
		} else {
			o := c.o
			m[target] = &o
		}
	}
	for name, ps := range edited {
		if ps.index(now); ps.count() == 0 {
			delete(out.policies, name)
		} else {
			out.policies[name] = ps
		}
	}
	for _, ps := range out.policies {
		out.total += ps.count()
		out.next = soonest(out.next, ps.next)
	}
	return out
}

// index drops the overrides expired at now and computes lengths and next.
func (ps *policySet) index(now time.Time) {
	for _, m := range []map[string]*Override{ps.exact, ps.prefixes} {
		for target, o := range m {
			if o.Expired(now) {
				delete(m, target)
				continue
			}
			ps.next = soonest(ps.next, o.ExpiresAt)
		}
	}
	for p := range ps.prefixes {
		if !slices.Contains(ps.lengths, len(p)) {
			ps.lengths = append(ps.lengths, len(p))
		}
	}
	slices.SortFunc(ps.lengths, func(a, b int) int { return cmp.Compare(b, a) })
}

func (ps *policySet) count() int { return len(ps.exact) + len(ps.prefixes) }

// soonest is the earlier of two expiries, zero standing for none.
func soonest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// expired reports whether an expiry (zero: none) has passed at now.
func expired(at, now time.Time) bool { return !at.IsZero() && !now.Before(at) }

// expiredBy reports whether any override in s has expired at now.
func (s *Set) expiredBy(now time.Time) bool { return s != nil && expired(s.next, now) }

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
	return s.policies[policy].count()
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
