package httplimit

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
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
	cfg      config
	enforced []limit
	shadow   []limit
	// policyAll is the RateLimit-Policy value when every enforced limit
	// applies, the usual case; it depends on nothing else, so it is built once.
	policyAll string
}

// New returns a Middleware for the limits and settings in opts. It needs at
// least one Limit.
func New(opts ...Option) (*Middleware, error) {
	m := &Middleware{cfg: config{
		v6Bits:     64,
		ipHeaders:  []string{HeaderXForwardedFor},
		maxDelay:   DefaultMaxDelay,
		policyName: map[string]bool{},
	}}
	for _, o := range opts {
		if err := o(&m.cfg); err != nil {
			return nil, err
		}
	}
	c := &m.cfg
	c.policyName = nil
	if len(c.limits) == 0 {
		return nil, errors.New("httplimit: New: no limits; add one with Limit")
	}
	for _, l := range c.limits {
		if l.shadow || c.shadowAll {
			m.shadow = append(m.shadow, l)
		} else {
			m.enforced = append(m.enforced, l)
		}
	}
	quotas := make([]Quota, len(m.enforced))
	for i := range m.enforced {
		quotas[i].Policy = &m.enforced[i].policy
	}
	m.policyAll = FormatPolicy(quotas)
	if c.logger == nil {
		c.logger = slog.Default()
	}
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
	q := &request{Request: r, m: m}
	cost := int64(1)
	if m.cfg.cost != nil {
		cost = m.cfg.cost(r)
	}
	quotas, admitted, err := m.decide(q, cost)
	if err != nil {
		m.cfg.onError(w, r, err)
		return
	}
	if len(m.shadow) > 0 {
		m.decideShadow(q, cost, admitted)
	}
	if !admitted {
		m.deny(w, r, quotas, cost)
		return
	}
	if !m.cfg.quiet {
		m.setHeaders(w.Header(), quotas)
	}
	var delay time.Duration
	for _, q := range quotas {
		delay = max(delay, q.Result.Delay)
	}
	if delay > 0 && !m.wait(w, r, delay) {
		return
	}
	next.ServeHTTP(w, r)
}

// decide checks the enforced limits that have a key for the request, all or
// nothing, and returns their quotas in the order of the limits.
func (m *Middleware) decide(q *request, cost int64) ([]Quota, bool, error) {
	checks := make([]sluice.Check, 0, len(m.enforced))
	quotas := make([]Quota, 0, len(m.enforced))
	for i := range m.enforced {
		l := &m.enforced[i]
		key, err := l.keyFor(q)
		if err != nil {
			return nil, false, err
		}
		if key == "" {
			continue
		}
		checks = append(checks, sluice.Check{Limiter: l.limiter, Key: key, Cost: cost, Peek: cost == 0})
		quotas = append(quotas, Quota{Policy: &l.policy})
	}
	if len(checks) == 0 {
		return nil, true, nil
	}
	results, err := sluice.AllowAll(q.Context(), checks...)
	if err != nil {
		return nil, false, err
	}
	for i := range results {
		quotas[i].Result = results[i]
	}
	return quotas, results[0].Allowed, nil
}

// decideShadow decides each shadow limit on its own, so that none of them can
// deny the request or keep another from counting it: charged when the request
// was admitted, peeked at otherwise (a denied request consumes nothing). A
// failure is logged and otherwise ignored, since shadow limits must never
// change what the client sees.
func (m *Middleware) decideShadow(q *request, cost int64, admitted bool) {
	n := cost
	if !admitted {
		n = 0
	}
	for i := range m.shadow {
		l := &m.shadow[i]
		key, err := l.keyFor(q)
		if err == nil && key == "" {
			continue
		}
		var res sluice.Result
		if err == nil {
			res, err = l.limiter.AllowN(q.Context(), key, n)
		}
		if err != nil {
			m.cfg.logger.WarnContext(q.Context(), "httplimit: shadow limit failed", "policy", l.policy.Name, "err", err)
			continue
		}
		switch {
		case admitted && !res.Allowed:
			m.cfg.onShadow(q.Request, ShadowDenial{Quota: Quota{Policy: &l.policy, Result: res}})
		case !admitted && res.Remaining < cost:
			res.Allowed = false
			m.cfg.onShadow(q.Request, ShadowDenial{Quota: Quota{Policy: &l.policy, Result: res}, Denied: true})
		}
	}
}

// keyFor returns the store key of the request under l, or "" when the limit
// does not apply to it.
func (l *limit) keyFor(q *request) (string, error) {
	k, err := l.key.get(q)
	if err != nil {
		return "", fmt.Errorf("httplimit: key of limit %q: %w", l.policy.Name, err)
	}
	if l.fallback.get == nil {
		return fitKey(k), nil
	}
	// Distinct prefixes keep the two key spaces apart.
	if k != "" {
		return fitKey("key:" + k), nil
	}
	if k, err = l.fallback.get(q); err != nil {
		return "", fmt.Errorf("httplimit: fallback key of limit %q: %w", l.policy.Name, err)
	}
	if k == "" {
		return "", nil
	}
	return fitKey("fallback:" + k), nil
}

func (m *Middleware) setHeaders(h http.Header, quotas []Quota) {
	if len(quotas) == 0 {
		return
	}
	policy := m.policyAll
	if len(quotas) != len(m.enforced) {
		policy = FormatPolicy(quotas)
	}
	setFields(h, policy, quotas)
	if m.cfg.legacy {
		setLegacyHeaders(h, quotas)
	}
}

func (m *Middleware) deny(w http.ResponseWriter, r *http.Request, quotas []Quota, cost int64) {
	// Every result of a denied batch carries the batch's RetryAfter.
	retry := quotas[0].Result.RetryAfter
	if m.cfg.jitter > 0 {
		retry += rand.N(m.cfg.jitter)
	}
	h := w.Header()
	m.setHeaders(h, quotas)
	setRetryAfter(h, retry)
	h.Set("Cache-Control", "no-store")
	// A denied batch reports each limit as it stands; those without room for
	// the cost are the ones that denied.
	var violated []Quota
	for _, q := range quotas {
		if q.Result.Remaining < cost {
			violated = append(violated, q)
		}
	}
	m.cfg.onDeny(w, r, Denial{RetryAfter: retry, Quotas: quotas, Violated: violated})
}

// wait holds an admitted request for its leaky-bucket Delay, at most
// MaxDelay, and reports whether to go on: false when the request's context
// ended first, in which case it has answered 503.
func (m *Middleware) wait(w http.ResponseWriter, r *http.Request, delay time.Duration) bool {
	delay = min(delay, m.cfg.maxDelay)
	if delay <= 0 {
		return true
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		// Usually the client has gone and nobody reads this; it is not the
		// limiter's failure, so it is not logged.
		writeProblem(w, problem{
			Type: ProblemUnavailable, Status: http.StatusServiceUnavailable,
			Detail: "The request ended while it waited for its turn.",
		})
		return false
	}
}
