package httpapi

import (
	"context"
	"net/http"

	"github.com/sluicehq/sluice/internal/service"
)

// Healthcheck says what GET /healthcheck, envoyproxy/ratelimit's health
// endpoint, depends on besides the process not draining or starting.
type Healthcheck struct {
	// Store: the store must answer, as /readyz checks it (ratelimit's
	// REDIS_HEALTH_CHECK_ACTIVE_CONNECTION).
	Store bool
	// Domains: the configuration in force must have at least one domain
	// (ratelimit's HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED).
	Domains bool
}

// WithHealthcheck sets what GET /healthcheck checks (default: neither the
// store nor the domains, as ratelimit by default).
func WithHealthcheck(h Healthcheck) Option { return func(a *api) { a.healthcheckOf = h } }

// WithRoute adds a route beside the API's own: method and path answered by
// h (serve adds envoyproxy/ratelimit's POST /json). Another method on path
// is a 405.
func WithRoute(method, path string, h http.Handler) Option {
	return func(a *api) { a.routes = append(a.routes, route{method, path, h}) }
}

type route struct {
	method, path string
	h            http.Handler
}

// healthcheck answers GET /healthcheck as envoyproxy/ratelimit does, so that
// its probes and load balancer checks work unchanged: 200 "OK" when healthy,
// 500 otherwise (with the reason, where ratelimit sends none). Unhealthy
// means draining (ratelimit: after SIGTERM), still starting, and, as
// configured, a store that does not answer or no domain loaded.
func (a *api) healthcheck(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if reason := a.unhealthy(r.Context()); reason != "" {
		http.Error(w, reason, http.StatusInternalServerError)
		return
	}
	_, _ = w.Write([]byte("OK"))
}

// unhealthy is why /healthcheck fails, or "".
func (a *api) unhealthy(ctx context.Context) string {
	if a.draining != nil && a.draining() {
		return "draining"
	}
	if a.waitingFor != nil {
		if what := a.waitingFor(); what != "" {
			return "starting: waiting for " + what
		}
	}
	return a.healthcheckOf.Failure(ctx, a.svc)
}

// Failure is why GET /healthcheck fails for svc besides draining and
// starting, as h says: no domain loaded (Domains), the store not deciding
// (Store: /readyz/store's rule); "" when neither. serve's gRPC health
// follows it too, as envoyproxy/ratelimit's health checker drives both.
func (h Healthcheck) Failure(ctx context.Context, svc *service.Service) string {
	if h.Domains && len(svc.Config().Domains) == 0 {
		return "no rate limit domain loaded"
	}
	if h.Store {
		ctx, cancel := context.WithTimeout(ctx, readyTimeout)
		defer cancel()
		if !svc.Ready(ctx).Ready {
			return "the store does not answer"
		}
	}
	return ""
}
