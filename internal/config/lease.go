package config

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"go.yaml.in/yaml/v3"
)

// leaseSection reads a lease section at path: `off`, or a mapping of ttl and
// max_lease. nil when it has problems.
func (p *fileParser) leaseSection(n *yaml.Node, path string) *Lease {
	if n.Kind == yaml.ScalarNode && n.Value == "off" {
		return &Lease{Off: true}
	}
	if n.Kind == yaml.ScalarNode {
		p.errorf(n, path, "must be off or a mapping such as {ttl: 50ms, max_lease: 100}, got %s", describe(n))
		return nil
	}
	l, ok := p.mapping(n, path, "ttl", "max_lease")
	if !ok {
		return nil
	}
	ttl, set := p.duration(l, "ttl")
	if set && ttl <= 0 {
		p.errorf(l.get("ttl"), path+".ttl", "must be positive, got %v (leave it out for the default)", ttl)
		return nil
	}
	return &Lease{TTL: ttl, MaxLease: int64(p.count(l, "max_lease", 1<<40))}
}

// policyLease checks a policy's lease section against the policy: only
// fixed_window, token_bucket and gcra are leased, and a TTL may not exceed
// the policy's span (the window, or the time its empty bucket takes to fill),
// which would let leases admit more than twice the limit.
func (p *fileParser) policyLease(n *yaml.Node, path string, pol *sluice.Policy) *Lease {
	l := p.leaseSection(n, path)
	if l == nil || l.Off {
		return l
	}
	if !sluice.Reservable(pol.Algorithm) {
		p.errorf(n, path, "%s is not leased (only fixed_window, token_bucket and gcra are): remove the lease section", pol.Algorithm)
		return nil
	}
	if span := LeaseSpan(pol); l.TTL > span {
		p.errorf(n, path+".ttl", "must not exceed %v (%s), got %v: leases could admit %.2f× the limit",
			span, spanName(pol), l.TTL, LeaseBound(pol, l.TTL))
		return nil
	}
	return l
}

// LeaseSpan is the time a lease's TTL is measured against: P for
// fixed_window, B·T (the time an empty bucket takes to fill) for the buckets.
func LeaseSpan(pol *sluice.Policy) time.Duration {
	if pol.Algorithm == sluice.FixedWindow {
		return pol.Period
	}
	return time.Duration(pol.Capacity()) * pol.EmissionInterval()
}

// LeaseBound is the worst-case ratio of admissions to the policy's own
// guarantee with leases of TTL d: 1 for fixed_window, 1 + d/(B·T) for the
// buckets (package lease proves it; Store.Bound reports it at run time).
func LeaseBound(pol *sluice.Policy, d time.Duration) float64 {
	if pol.Algorithm == sluice.FixedWindow {
		return 1
	}
	return 1 + float64(d)/float64(LeaseSpan(pol))
}

func spanName(pol *sluice.Policy) string {
	if pol.Algorithm == sluice.FixedWindow {
		return "the period"
	}
	return fmt.Sprintf("B·T, the time its empty bucket of %d takes to fill", pol.Capacity())
}
