package lease

import (
	"time"

	"github.com/sluicehq/sluice"
)

// ttlFraction is the default lease TTL as a part of the policy's span: 1/20
// gives the buckets an overshoot bound of 1.05.
const ttlFraction = 20

// span is P for fixed_window, B·T (the time an empty bucket takes to fill)
// for token_bucket and gcra.
func span(p *sluice.Policy) time.Duration {
	if p.Algorithm == sluice.FixedWindow {
		return p.Period
	}
	return time.Duration(p.Capacity()) * p.EmissionInterval()
}

// TTL returns the lease lifetime d the store uses for p, or 0 when p's
// algorithm is not leased.
func (s *Store) TTL(p *sluice.Policy) time.Duration { return s.ttlOf(p) }

func (s *Store) ttlOf(p *sluice.Policy) time.Duration {
	st := s.settingsOf(p)
	if st.Off || !sluice.Reservable(p.Algorithm) || s.reserver == nil {
		return 0
	}
	if st.TTL > 0 {
		return st.TTL
	}
	return max(time.Microsecond, span(p)/ttlFraction)
}

func (s *Store) maxLeaseOf(p *sluice.Policy) int64 {
	if n := s.settingsOf(p).MaxLease; n > 0 {
		return min(n, p.Capacity())
	}
	return max(1, p.Capacity()/10)
}

// MaxLease returns the most units one reservation takes for p.
func (s *Store) MaxLease(p *sluice.Policy) int64 { return s.maxLeaseOf(p) }

// Bound returns the worst-case ratio of admissions with leases to the
// policy's own guarantee, over any interval (docs/algorithms.md, "Leases"):
// 1 for fixed_window (a lease never outlives its window) and for the
// algorithms that are not leased; 1 + d/(B·T) for token_bucket and gcra,
// whose reservations may be spent up to d later.
func (s *Store) Bound(p *sluice.Policy) float64 {
	if p.Algorithm == sluice.FixedWindow || s.ttlOf(p) == 0 {
		return 1
	}
	return 1 + float64(s.ttlOf(p))/float64(span(p))
}

// Stranded returns the most units one node can hold unused for p (its
// lease): what a node that dies or goes idle makes the others under-admit,
// until the lease's window ends (fixed_window) or for good (the buckets,
// whose credit refills anyway: one lease's worth is lost once).
func (s *Store) Stranded(p *sluice.Policy) int64 {
	if s.ttlOf(p) == 0 {
		return 0
	}
	return s.maxLeaseOf(p)
}
