package service

import (
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/lease"
)

// leaseSettings are the per-policy lease sections of cfg, for
// lease.Store.SetPolicies.
func leaseSettings(cfg *config.Config) map[string]lease.Settings {
	m := map[string]lease.Settings{}
	for name, p := range cfg.Policies {
		if l := p.Lease; l != nil {
			m[name] = lease.Settings{Off: l.Off, TTL: l.TTL, MaxLease: l.MaxLease}
		}
	}
	return m
}
