package httplimit

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/limitcore"
)

// Middleware limits the requests that reach the handlers it wraps. Build one
// with New. It is safe for concurrent use; every handler it wraps shares its
// limits (use one Middleware per route for per-route limits).
//
// For each request it derives every limit's key, checks the enforced limits
// all or nothing, and then either passes the request on — after the leaky
// bucket's Delay, if any — with the RateLimit-Policy and RateLimit fields
// set, or answers 429 with an exact Retry-After.
type Middleware struct {
	cfg  config
	core *limitcore.Core[*request]
}

// New returns a Middleware for the limits and settings in opts. It needs at
// least one Limit.
func New(opts ...Option) (*Middleware, error) {
	m := &Middleware{cfg: config{
		Settings:  limitcore.NewSettings[*request]("httplimit"),
		ipHeaders: []string{HeaderXForwardedFor},
	}}
	for _, o := range opts {
		if err := o(&m.cfg); err != nil {
			return nil, err
		}
	}
	c := &m.cfg
	core, err := limitcore.New(&c.Settings, FormatPolicy, func(_ context.Context, q *request, quota Quota, denied bool) {
		c.onShadow(q.Request, ShadowDenial{Quota: quota, Denied: denied})
	})
	if err != nil {
		return nil, err
	}
	m.core = core
	if c.onDeny == nil {
		c.onDeny = WriteDenial
	}
	if c.onError == nil {
		c.onError = m.defaultError
	}
	if c.onShadow == nil {
		c.onShadow = m.defaultShadow
	}
	return m, nil
}

// Handler returns next wrapped by the middleware.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	cost := int64(1)
	if m.cfg.cost != nil {
		cost = m.cfg.cost(r)
	}
	q := &request{Request: r, m: m}
	d, err := m.core.Decide(r.Context(), q, cost)
	if err != nil {
		m.cfg.onError(w, r, err)
		return
	}
	if !d.Allowed {
		m.deny(w, r, d)
		return
	}
	if d.Holds() {
		// Given back when the request ends: the handler returns or
		// panics, or the client goes away and the handler gives up.
		defer m.core.Release(r.Context(), &d)
	}
	if !m.cfg.Quiet {
		m.setHeaders(w.Header(), d.Quotas)
	}
	if d.Delay > 0 && !m.wait(w, r, d.Delay) {
		return
	}
	m.next(w, q, next)
}

func (m *Middleware) setHeaders(h http.Header, quotas []Quota) {
	if len(quotas) == 0 {
		return
	}
	setFields(h, m.core.PolicyField(quotas), quotas)
	if m.cfg.legacy {
		setLegacyHeaders(h, quotas)
	}
}

func (m *Middleware) deny(w http.ResponseWriter, r *http.Request, d limitcore.Decision) {
	h := w.Header()
	m.setHeaders(h, d.Quotas)
	setRetryAfter(h, d.RetryAfter)
	h.Set("Cache-Control", "no-store")
	m.cfg.onDeny(w, r, Denial{RetryAfter: d.RetryAfter, Quotas: d.Quotas, Violated: d.Violated})
}

// wait holds an admitted request for its leaky-bucket Delay and reports
// whether to go on: false when the request's context ended first, in which
// case it has answered 503.
func (m *Middleware) wait(w http.ResponseWriter, r *http.Request, delay time.Duration) bool {
	if limitcore.Wait(r.Context(), delay) == nil {
		return true
	}
	// Usually the client has gone and nobody reads this; it is not the
	// limiter's failure, so it is not logged.
	writeProblem(w, problem{
		Type: ProblemUnavailable, Status: http.StatusServiceUnavailable,
		Detail: "The request ended while it waited for its turn.",
	})
	return false
}
