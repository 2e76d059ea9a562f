package httplimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// Problem types (RFC 9457) of the middleware's problem+json bodies. They are
// tag URIs: stable identifiers to match on, not pages to fetch.
const (
	ProblemRateLimited = "tag:sluicehq.github.io,2026:rate-limited"
	ProblemUnavailable = "tag:sluicehq.github.io,2026:limiter-unavailable"
	ProblemCostTooHigh = "tag:sluicehq.github.io,2026:cost-exceeds-capacity"
)

// Denial describes a denied request to a DenyHandler.
type Denial struct {
	// RetryAfter is when the request would be admitted, plus any jitter
	// (WithRetryJitter): what Retry-After advertises, before rounding up.
	RetryAfter time.Duration
	// Quotas are the enforced limits that applied to the request, with what
	// they reported. A denied request consumed nothing, so these are the
	// limits as they stand.
	Quotas []Quota
	// Violated are the quotas that denied the request.
	Violated []Quota
}

// DenyHandler writes the response to a denied request; see WithDenyHandler.
type DenyHandler func(w http.ResponseWriter, r *http.Request, d Denial)

// ErrorHandler writes the response to a request whose limits could not be
// checked; see WithErrorHandler.
type ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)

// ShadowDenial reports that a shadow limit would have denied a request.
type ShadowDenial struct {
	// Quota is the shadow limit and its Result. When Denied is false, Result
	// is the real decision (not admitted, so nothing was charged, and
	// RetryAfter is exact).
	Quota
	// Denied: the enforced limits denied the request anyway, so the shadow
	// limit was only peeked at; Result.Allowed is false and RetryAfter 0
	// (unknown).
	Denied bool
}

// problem is an RFC 9457 problem details object.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// Violated lists the limits that denied the request (an extension member).
	Violated []violation `json:"violated_policies,omitempty"`
}

type violation struct {
	Name       string `json:"name"`
	Limit      int64  `json:"limit"`
	Window     int64  `json:"window"`      // seconds
	Remaining  int64  `json:"remaining"`   // units
	RetryAfter int64  `json:"retry_after"` // seconds, as Retry-After
}

// WriteDenial is the default DenyHandler: 429 Too Many Requests with an
// application/problem+json body whose violated_policies member lists each
// limit that denied the request with its retry_after in seconds (the whole
// request's, as in Retry-After: a request passes only when all its limits
// admit it). A custom DenyHandler can fall back to it, say for clients that
// do not ask for HTML.
func WriteDenial(w http.ResponseWriter, _ *http.Request, d Denial) {
	retry := Seconds(d.RetryAfter)
	p := problem{
		Type:     ProblemRateLimited,
		Title:    http.StatusText(http.StatusTooManyRequests),
		Status:   http.StatusTooManyRequests,
		Violated: make([]violation, len(d.Violated)),
	}
	names := make([]string, len(d.Violated))
	for i, q := range d.Violated {
		names[i] = q.Policy.Name
		p.Violated[i] = violation{
			Name:       q.Policy.Name,
			Limit:      q.Policy.Limit,
			Window:     windowSeconds(q.Policy),
			Remaining:  max(0, q.Result.Remaining),
			RetryAfter: retry,
		}
	}
	p.Detail = fmt.Sprintf("Rate limit exceeded (%s); retry in %d s.", strings.Join(names, ", "), retry)
	writeProblem(w, p)
}

func writeProblem(w http.ResponseWriter, p problem) {
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	body, err := json.Marshal(p)
	if err != nil { // cannot happen: strings and integers only
		http.Error(w, p.Title, p.Status)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	w.Write(body)
}

// defaultError is the default ErrorHandler; see WithErrorHandler.
func (m *Middleware) defaultError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, sluice.ErrExceedsCapacity) {
		// The request, not the service, is at fault: no retry can pass it.
		m.cfg.Logger.InfoContext(r.Context(), "httplimit: request cost exceeds a limit's capacity",
			"method", r.Method, "path", r.URL.Path, "err", err)
		writeProblem(w, problem{
			Type: ProblemCostTooHigh, Status: http.StatusRequestEntityTooLarge,
			Detail: "The request costs more than a rate limit can ever admit at once.",
		})
		return
	}
	m.cfg.Logger.ErrorContext(r.Context(), "httplimit: cannot check rate limits",
		"method", r.Method, "path", r.URL.Path, "err", err)
	writeProblem(w, problem{
		Type: ProblemUnavailable, Status: http.StatusServiceUnavailable,
		Detail: "The rate limiter is unavailable; try again later.",
	})
}

// defaultShadow is the default shadow report; see WithShadowDenialHandler.
func (m *Middleware) defaultShadow(r *http.Request, d ShadowDenial) {
	m.cfg.Logger.WarnContext(r.Context(), "httplimit: shadow limit would deny",
		"policy", d.Policy.Name, "retry_after", d.Result.RetryAfter, "denied_anyway", d.Denied,
		"method", r.Method, "path", r.URL.Path)
}
