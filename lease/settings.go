package lease

import (
	"time"

	"github.com/sluicehq/sluice"
)

// Settings are one policy's lease settings, overriding the store's options
// (WithTTL, WithMaxLease) for that policy.
type Settings struct {
	// Off decides every request of the policy on the remote store.
	Off bool
	// TTL is the lease lifetime d; 0 takes the store's.
	TTL time.Duration
	// MaxLease caps the units one reservation takes; 0 takes the store's.
	MaxLease int64
}

// SetPolicies replaces the per-policy settings, by policy name; a policy not
// in m takes the store's options. A reload calls it with the new policies:
// a lease already held keeps its units until it is next used or expires.
func (s *Store) SetPolicies(m map[string]Settings) {
	if len(m) == 0 {
		m = nil
	}
	s.policies.Store(&m)
}

// settingsOf returns p's settings: its own, else the store's.
func (s *Store) settingsOf(p *sluice.Policy) Settings {
	def := Settings{Off: s.off, TTL: s.ttl, MaxLease: s.maxLease}
	m := s.policies.Load()
	if m == nil || *m == nil {
		return def
	}
	own, ok := (*m)[p.Name]
	if !ok {
		return def
	}
	if own.TTL == 0 {
		own.TTL = def.TTL
	}
	if own.MaxLease == 0 {
		own.MaxLease = def.MaxLease
	}
	return own
}
