// Package httpapi is the HTTP front end of `sluice serve`:
//
//	POST /v1/check          decide one check or several, all or nothing
//	POST /v1/release        give back an in-flight slot a check acquired
//	GET  /v1/policies       the policies in force
//	POST /v1/admin/reset    forget a key's state (needs the admin bearer token;
//	                        absent when no token is configured; Admin serves
//	                        the admin routes alone, for a port of their own)
//	PUT, GET, DELETE /v1/admin/overrides/{policy}
//	                        limits set at runtime per key or key prefix (admin)
//	GET  /healthz           the process is up
//	GET  /readyz            the server answers checks, by the store or by its
//	                        fail policy: not starting (WithStarting) nor draining
//	GET  /readyz/store      /readyz, and the store decides (not the fail policy)
//	GET  /metrics           Prometheus metrics
//	GET  /healthcheck       envoyproxy/ratelimit's health check: 200 "OK" or 500
//
// WithRoute adds more (serve: envoyproxy/ratelimit's POST /json).
//
// A check answers 200 when allowed and 429 when denied, both with a JSON body
// and the RateLimit-Policy / RateLimit fields (and Retry-After when denied).
// Malformed input is a 400, an unknown policy a 404, each with a JSON error
// naming the field; a store failure is a 503.
package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/service"
)

// Default limits on requests; see the options to change them.
const (
	// DefaultMaxBodyBytes caps a request body.
	DefaultMaxBodyBytes = 64 << 10
	// DefaultMaxChecks caps the checks of one request.
	DefaultMaxChecks = 64
	// readyTimeout bounds the store probe of /readyz and /readyz/store.
	readyTimeout = 2 * time.Second
)

// Option configures the handler.
type Option func(*api)

// WithAdminToken turns on the admin API (POST /v1/admin/reset and the
// override endpoints), guarded by this bearer token, compared in constant
// time. A wrong or missing token is a 401, counted in
// sluice_admin_auth_failures_total and logged (at most 10 lines a minute);
// an address that sends more than AdminFailureBurst of them gets 429 with
// Retry-After until its failures drain at AdminFailureBurst per
// AdminFailurePeriod. Without a token the endpoints do not exist. Servers
// should refuse a weak token first: see CheckAdminToken.
func WithAdminToken(token string) Option { return func(a *api) { a.adminToken = token } }

// WithClock sets the clock the admin API's failure limits read (default:
// the system's). Tests use it to let time pass.
func WithClock(c sluice.Clock) Option { return func(a *api) { a.clock = c } }

// WithMaxBodyBytes caps request bodies (default DefaultMaxBodyBytes).
func WithMaxBodyBytes(n int64) Option { return func(a *api) { a.maxBody = n } }

// WithMaxChecks caps the checks of one request (default DefaultMaxChecks).
func WithMaxChecks(n int) Option { return func(a *api) { a.maxChecks = n } }

// WithDraining makes /readyz (and /readyz/store) answer 503 {"status":"draining"} whenever
// draining reports true, whatever the store's health: the server is shutting
// down and load balancers should move traffic away while it still answers.
func WithDraining(draining func() bool) Option { return func(a *api) { a.draining = draining } }

// WithStarting makes /readyz (and /readyz/store) answer 503 {"status":"starting","waiting_for":…}
// while waitingFor names something start-up still waits for (serve: the
// first configuration from its xDS server), whatever the store's health.
func WithStarting(waitingFor func() string) Option { return func(a *api) { a.waitingFor = waitingFor } }

type api struct {
	svc        *service.Service
	adminToken string
	guard      *adminGuard // nil without a token
	clock      sluice.Clock
	maxBody    int64
	maxChecks  int
	draining   func() bool
	waitingFor func() string

	healthcheckOf Healthcheck // GET /healthcheck's checks
	routes        []route     // WithRoute's
}

// New returns the API's handler over svc.
func New(svc *service.Service, opts ...Option) http.Handler {
	a := newAPI(svc, opts)
	r := newRoutes()
	r.handle("POST", "/v1/check", svc.Tracer().HTTP("POST", "/v1/check", http.HandlerFunc(a.check)))
	r.handle("POST", "/v1/release", svc.Tracer().HTTP("POST", "/v1/release", http.HandlerFunc(a.release)))
	r.handle("GET", "/v1/policies", http.HandlerFunc(a.policies))
	a.admin(r)
	for _, rt := range a.routes {
		r.handle(rt.method, rt.path, rt.h)
	}
	a.health(r)
	return r.done()
}

// Admin returns the handler of the admin routes alone, answering as New's
// do, for a server that keeps them off the decision port. Without
// WithAdminToken every path is 404.
func Admin(svc *service.Service, opts ...Option) http.Handler {
	r := newRoutes()
	newAPI(svc, opts).admin(r)
	return r.done()
}

// admin adds the admin routes to r, when there is a token.
func (a *api) admin(r *routes) {
	if a.guard == nil {
		return
	}
	r.handle("POST", "/v1/admin/reset", a.adminOnly(a.reset))
	if a.svc.Overrides() != nil {
		r.mux.Handle("PUT /v1/admin/overrides/{policy}", a.adminOnly(a.putOverride))
		r.mux.Handle("GET /v1/admin/overrides", a.adminOnly(a.listOverrides))
		r.mux.Handle("GET /v1/admin/overrides/{policy}", a.adminOnly(a.listOverrides))
		r.mux.Handle("DELETE /v1/admin/overrides/{policy}", a.adminOnly(a.deleteOverride))
	}
}

// adminOnly runs h only for a request carrying the admin token; the guard
// answers the others.
func (a *api) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.guard.admit(w, r) {
			h(w, r)
		}
	}
}

// Health returns the handler of GET /healthz, /readyz, /readyz/store,
// /healthcheck and /metrics alone,
// answering as New's do, for a server whose other port serves something
// else (sluice proxy). Options other than WithDraining do not apply.
func Health(svc *service.Service, opts ...Option) http.Handler {
	r := newRoutes()
	newAPI(svc, opts).health(r)
	return r.done()
}

func newAPI(svc *service.Service, opts []Option) *api {
	a := &api{svc: svc, maxBody: DefaultMaxBodyBytes, maxChecks: DefaultMaxChecks}
	for _, o := range opts {
		o(a)
	}
	if a.adminToken != "" {
		a.guard = newAdminGuard(a.adminToken, svc.Registry(), svc.Logger(), a.clock)
	}
	return a
}

// health adds the process's health, readiness and metrics to r.
func (a *api) health(r *routes) {
	r.handle("GET", "/healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	r.handle("GET", "/readyz", a.ready(false))
	r.handle("GET", "/readyz/store", a.ready(true))
	r.handle("GET", "/healthcheck", http.HandlerFunc(a.healthcheck))
	r.handle("GET", "/metrics", promhttp.HandlerFor(a.svc.Registry(), promhttp.HandlerOpts{}))
}

// routes is a mux that remembers each path's method, for 405 answers.
type routes struct {
	mux     *http.ServeMux
	methods map[string]string // path → its method
}

func newRoutes() *routes { return &routes{mux: http.NewServeMux(), methods: map[string]string{}} }

func (r *routes) handle(method, path string, h http.Handler) {
	r.mux.Handle(method+" "+path, h)
	r.methods[path] = method
}

// done adds the JSON answers to everything else and returns the mux.
func (r *routes) done() http.Handler {
	r.mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		if m, ok := r.methods[req.URL.Path]; ok {
			w.Header().Set("Allow", m)
			writeError(w, http.StatusMethodNotAllowed, &apiError{Code: "method_not_allowed", Message: req.URL.Path + " takes " + m})
			return
		}
		writeError(w, http.StatusNotFound, &apiError{Code: "not_found", Message: "no such endpoint: " + req.Method + " " + req.URL.Path})
	})
	return r.mux
}

// policyView is one entry of GET /v1/policies.
type policyView struct {
	Name      string     `json:"name"`
	Algorithm string     `json:"algorithm"`
	Limit     int64      `json:"limit"`
	Period    string     `json:"period"`
	PeriodMS  int64      `json:"period_ms"`
	Burst     int64      `json:"burst,omitempty"`
	Shadow    bool       `json:"shadow,omitempty"`
	Plans     *plansView `json:"plans,omitempty"`
	Source    string     `json:"source,omitempty"`
}

// plansView is a policy's plans in GET /v1/policies.
type plansView struct {
	Default string              `json:"default,omitempty"`
	From    *planSourceView     `json:"from,omitempty"`
	Limits  map[string]planView `json:"limits"`
}

type planSourceView struct {
	DescriptorKey string `json:"descriptor_key,omitempty"`
	Header        string `json:"header,omitempty"`
}

type planView struct {
	Limit    int64  `json:"limit"`
	Period   string `json:"period"`
	PeriodMS int64  `json:"period_ms"`
	Burst    int64  `json:"burst,omitempty"`
}

// viewPlans is the view of plans; nil for none.
func viewPlans(pl *config.Plans) *plansView {
	if pl == nil {
		return nil
	}
	v := &plansView{Default: pl.Default, Limits: make(map[string]planView, len(pl.Limits))}
	if pl.From != (config.PlanSource{}) {
		v.From = &planSourceView{DescriptorKey: pl.From.DescriptorKey, Header: pl.From.Header}
	}
	for name, l := range pl.Limits {
		v.Limits[name] = planView{Limit: l.Limit, Period: l.Period.String(), PeriodMS: l.Period.Milliseconds(), Burst: l.Burst}
	}
	return v
}

func (a *api) policies(w http.ResponseWriter, r *http.Request) {
	cfg := a.svc.Config()
	out := make([]policyView, 0, len(cfg.Policies))
	for _, p := range cfg.Policies {
		v := policyView{Name: p.Name, Algorithm: string(p.Algorithm), Limit: p.Limit,
			Period: p.Period.String(), PeriodMS: p.Period.Milliseconds(), Burst: p.Burst, Shadow: p.Shadow, Plans: viewPlans(p.Plans)}
		if p.File != "" {
			v.Source = p.File + ":" + itoa(int64(p.Line))
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(x, y policyView) int { return cmp.Compare(x.Name, y.Name) })
	writeJSON(w, http.StatusOK, map[string]any{"policies": out})
}

// ready answers readiness. A node whose store has a fail policy answers
// every check while the store cannot decide, by store.on_error, so the
// store's health does not make it unready unless storeRequired
// (/readyz/store): pulling every node out of
// load balancing when their shared Redis fails would hand the decision to
// each client's own failure handling (Envoy's failure_mode_deny admits by
// default) instead of the fail policy the operator chose. The store is
// probed either way, for the body, and so that an idle node's readiness
// checks probe a half-open breaker.
func (a *api) ready(storeRequired bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.draining != nil && a.draining() {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
			return
		}
		if a.waitingFor != nil {
			if what := a.waitingFor(); what != "" {
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting", "waiting_for": what})
				return
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		st := a.svc.Ready(ctx)
		body := struct {
			Status string `json:"status"`
			Store  any    `json:"store"`
		}{"ready", st}
		code := http.StatusOK
		switch {
		case st.Ready:
		case storeRequired || !st.Answering():
			body.Status, code = "unavailable", http.StatusServiceUnavailable
		default:
			body.Status = "degraded" // answering by the fail policy
		}
		writeJSON(w, code, body)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do then
}
