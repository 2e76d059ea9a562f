package config

import "maps"

// Modes are envoyproxy/ratelimit's global switches, its SHADOW_MODE and
// QUOTA_MODE variables: they change every limit of the rate limit domains
// (the envoyproxy/ratelimit-format files and the xDS configuration), which
// are envoyproxy/ratelimit's whole configuration. Native policies are
// Sluice's own, and keep their shadow setting.
type Modes struct {
	// Shadow puts every limit of the domains in shadow mode (decided and
	// counted, never enforced) and the domains themselves (Domain.Shadow):
	// no request to them is denied, quota mode's included.
	Shadow bool
	// Quota puts every limit of the domains in quota mode, as quota_mode:
	// true on each descriptor would.
	Quota bool
}

// WithModes returns c with m applied to its domains and their limits, or c
// itself when m switches nothing on. c is not modified: the limits m changes
// are copies, in the domain trees and in Policies alike, so that a limit is
// still one *Policy wherever it is found.
func (c *Config) WithModes(m Modes) *Config {
	if m == (Modes{}) || len(c.Domains) == 0 {
		return c
	}
	out := *c
	out.Policies = maps.Clone(c.Policies)
	out.Domains = make(map[string]*Domain, len(c.Domains))
	copies := map[*Policy]*Policy{}
	limit := func(p *Policy) *Policy {
		if q, done := copies[p]; done {
			return q
		}
		q := *p
		q.Shadow = q.Shadow || m.Shadow || m.Quota
		q.QuotaMode = q.QuotaMode || m.Quota
		copies[p] = &q
		if out.Policies[p.Name] == p {
			out.Policies[p.Name] = &q
		}
		return &q
	}
	for name, d := range c.Domains {
		nd := *d
		nd.Shadow = d.Shadow || m.Shadow
		nd.Descriptors = copyTree(d.Descriptors, limit)
		out.Domains[name] = &nd
	}
	return &out
}

// copyTree copies a level of a descriptor tree and every level below it,
// each limit replaced by limit's copy of it.
func copyTree(level []*Descriptor, limit func(*Policy) *Policy) []*Descriptor {
	if level == nil {
		return nil
	}
	out := make([]*Descriptor, len(level))
	for i, d := range level {
		nd := *d
		if d.Limits != nil {
			nd.Limits = make([]*Policy, len(d.Limits))
			for j, p := range d.Limits {
				nd.Limits[j] = limit(p)
			}
		}
		nd.Children = copyTree(d.Children, limit)
		out[i] = &nd
	}
	return out
}
