package main

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/service"
)

// healthEvery is how often the gRPC health service looks at the store and
// the domains, with --healthcheck-store or --healthcheck-domains.
const healthEvery = time.Second

// healthFollower decides what serve's gRPC health service reports: not while
// starting (waiting for the xDS server) and, as /healthcheck does with
// --healthcheck-store or --healthcheck-domains (envoyproxy/ratelimit's
// REDIS_HEALTH_CHECK_ACTIVE_CONNECTION and
// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED), not while the store does not
// decide or no domain is loaded: ratelimit's health checker drives its gRPC
// health and /healthcheck alike. Draining is the RLS server's Shutdown.
type healthFollower struct {
	set      func(bool) // the RLS server's SetServing
	health   httpapi.Healthcheck
	svc      *service.Service
	log      *slog.Logger
	starting atomic.Bool
	mu       sync.Mutex
	serving  bool
}

func newHealthFollower(set func(bool), h httpapi.Healthcheck, svc *service.Service, log *slog.Logger) *healthFollower {
	return &healthFollower{set: set, health: h, svc: svc, log: log, serving: true}
}

// follows reports whether the store or the domains decide too.
func (g *healthFollower) follows() bool { return g.health.Store || g.health.Domains }

// xds hears the xDS wait's verdict (xdsOptions.waitingFor).
func (g *healthFollower) xds(serving bool) {
	g.starting.Store(!serving)
	g.update(context.Background())
}

// update sets what the health service reports now.
func (g *healthFollower) update(ctx context.Context) {
	why := ""
	if g.starting.Load() {
		why = "starting"
	} else if g.follows() {
		why = g.health.Failure(ctx, g.svc)
	}
	serving := why == ""
	g.mu.Lock()
	defer g.mu.Unlock()
	if serving == g.serving {
		return
	}
	g.serving = serving
	if g.follows() && why != "starting" {
		g.log.Warn("gRPC health follows /healthcheck", "serving", serving, "reason", why)
	}
	g.set(serving)
}

// run updates the health service every healthEvery until ctx ends, when
// it follows the store or the domains.
func (g *healthFollower) run(ctx context.Context) {
	if !g.follows() {
		return
	}
	t := time.NewTicker(healthEvery)
	defer t.Stop()
	for {
		g.update(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
