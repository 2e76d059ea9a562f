package proxy

import (
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/decide"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/limitcore"
	"github.com/sluicehq/sluice/internal/service"
)

// handler limits each request by the first route of the configuration in
// force that matches it, deciding through the service's engine, and passes
// what it admits, or what matches no limited route, to next.
type handler struct {
	svc  *service.Service
	next http.Handler
	deny httplimit.DenyHandler // the answer to a denial, after its fields are set
	log  *slog.Logger
	// holdsSlots: next ends with the request, so an in-flight slot can be
	// held until it does (the reverse proxy); forward-auth answers before
	// the gateway's request even starts, so it refuses concurrency limits.
	holdsSlots bool

	mu    sync.Mutex // orders rebuilds
	built atomic.Pointer[routes]
}

func newHandler(svc *service.Service, next http.Handler, deny httplimit.DenyHandler, log *slog.Logger, holdsSlots bool) (*handler, error) {
	h := &handler{svc: svc, next: next, deny: deny, log: log, holdsSlots: holdsSlots}
	rs, err := h.build(svc.Config())
	if err != nil {
		return nil, err
	}
	h.built.Store(rs)
	return h, nil
}

// build builds cfg's routes, refusing concurrency limits unless h holds
// slots.
func (h *handler) build(cfg *config.Config) (*routes, error) {
	rs, err := buildRoutes(cfg)
	if err == nil && !h.holdsSlots {
		err = refuseSlots(rs)
	}
	return rs, err
}

// routes returns the routes of the configuration in force, rebuilt after
// a reload. A configuration whose routes cannot be built (the service keeps
// only valid ones; a hand-built one may not be) leaves the last routes in
// force, with a log line.
func (h *handler) routes() *routes {
	cfg := h.svc.Config()
	if rs := h.built.Load(); rs.cfg == cfg {
		return rs
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.built.Load()
	if old.cfg == cfg {
		return old
	}
	rs, err := h.build(cfg)
	if err != nil {
		h.log.Error("the proxy's routes cannot be built from the configuration in force; the previous routes stay", "error", err)
		kept := *old
		kept.cfg = cfg // not tried again until the next configuration
		rs = &kept
	}
	h.built.Store(rs)
	return rs
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rs := h.routes()
	rt := rs.match(r)
	if rt == nil || len(rt.limits) == 0 {
		h.next.ServeHTTP(w, r) // no route, or one without limits: unlimited, as documented
		return
	}
	q := &request{Request: r, trusted: rs.trusted}
	checks := make([]engine.Check, 0, len(rt.limits))
	chargeHeaders := make([]string, 0, len(rt.limits)) // of each check
	for i := range rt.limits {
		l := &rt.limits[i]
		key, _ := limitcore.StoreKey(l.key, l.fallback, q) // the configured keys never fail
		if key == "" {
			continue // the limit does not apply: see config.RouteLimit.Fallback
		}
		c := engine.Check{Policy: l.policy, Key: key, Cost: l.cost}
		if l.planHeader != "" {
			c.Plan = r.Header.Get(l.planHeader)
		}
		checks = append(checks, c)
		chargeHeaders = append(chargeHeaders, l.chargeHeader)
	}
	if len(checks) == 0 {
		h.next.ServeHTTP(w, r)
		return
	}
	results := make([]sluice.Result, len(checks))
	allowed, err := h.svc.Decide(r.Context(), checks, results)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d := decisionOf(checks, results, allowed)
	if !allowed {
		hd := w.Header()
		httplimit.SetHeaders(hd, d.Quotas, d.RetryAfter)
		hd.Set("Cache-Control", "no-store")
		h.deny(w, r, d.Denial)
		return
	}
	if h.holdsSlots {
		// The slots are held until the upstream's answer is copied, or the
		// client goes, or the copy panics.
		defer h.release(r, checks)
	}
	if cs := chargedOf(checks, chargeHeaders); cs != nil {
		defer h.charge(w, r, cs)
	}
	httplimit.SetHeaders(w.Header(), d.Quotas, 0)
	if d.delay > 0 && limitcore.Wait(r.Context(), d.delay) != nil {
		// Usually the client has gone and nobody reads this; it is not the
		// limiter's failure, so it is not logged.
		writeProblem(w, httplimit.ProblemUnavailable, http.StatusServiceUnavailable, "The request ended while it waited for its turn.")
		return
	}
	h.next.ServeHTTP(w, r)
}

// decision is a decided request as the client is told it.
type decision struct {
	httplimit.Denial
	delay time.Duration // an admitted request's leaky-bucket Delay, at most DefaultMaxDelay
}

// decisionOf describes the enforced checks of a decided request, under the
// limits they were decided under: shadow limits are not advertised, since
// clients must not slow down for a limit that does not exist yet.
func decisionOf(checks []engine.Check, results []sluice.Result, allowed bool) decision {
	var d decision
	for i := range checks {
		c := &checks[i]
		if c.Policy.Shadow {
			continue
		}
		q := httplimit.Quota{Policy: &c.Applied().Policy, Result: results[i]}
		d.Quotas = append(d.Quotas, q)
		if allowed {
			d.delay = max(d.delay, q.Result.Delay)
			continue
		}
		d.RetryAfter = max(d.RetryAfter, q.Result.RetryAfter)
		if c.Flags&decide.Exhausted != 0 {
			d.Violated = append(d.Violated, q)
		}
	}
	d.delay = min(d.delay, httplimit.DefaultMaxDelay)
	return d
}

// fail answers a request whose limits could not be checked: the store
// failed, or its fail policy is closed.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	h.log.ErrorContext(r.Context(), "proxy: cannot check rate limits", "method", r.Method, "path", r.URL.Path, "err", err)
	writeProblem(w, httplimit.ProblemUnavailable, http.StatusServiceUnavailable, "The rate limiter is unavailable; try again later.")
}
