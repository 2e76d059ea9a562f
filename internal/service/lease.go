package service

import (
	"sort"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memory"
)

// leaseStore returns the lease.Store the service decides through, or nil
// when the store section has no lease.
func leaseStore(store sluice.Store) *lease.Store {
	ls, _ := store.(*lease.Store)
	return ls
}

// failoverStore returns the fail-over Store behind store (inside its leases,
// if any), or nil when the store has no fail policy.
func failoverStore(store sluice.Store) *failover.Store {
	if ls := leaseStore(store); ls != nil {
		store = ls.Remote()
	}
	fs, _ := store.(*failover.Store)
	return fs
}

// memoryStores returns the memory stores behind store, by role: "memory"
// for the memory store itself, "local" for the fallback of on_error: local.
func memoryStores(store sluice.Store) map[string]*memory.Store {
	out := map[string]*memory.Store{}
	if ms, ok := store.(*memory.Store); ok {
		out["memory"] = ms
	}
	if fs := failoverStore(store); fs != nil && fs.Mode() == failover.FailLocal {
		if ms, ok := fs.Local().(*memory.Store); ok {
			out["local"] = ms
		}
	}
	return out
}

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

// policyLeasesUnused reports the policies with a lease section while the
// store has none: leases need the lease layer that store.lease turns on.
func policyLeasesUnused(cfg *config.Config) []config.Problem {
	var list []config.Problem
	for _, p := range cfg.Policies {
		if p.Lease != nil && !p.Lease.Off {
			list = append(list, config.Problem{File: p.File, Line: p.Line, Field: "lease",
				Message: "policy " + p.Name + " has a lease section, but the store has none: set store.lease (off leases only the policies that ask) with a redis:// url"})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].File != list[j].File {
			return list[i].File < list[j].File
		}
		return list[i].Line < list[j].Line
	})
	return list
}
