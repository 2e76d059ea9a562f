package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
)

// checkJSON is one check as a client sends it. Cost is optional: absent
// means 1, and 0 is a peek.
type checkJSON struct {
	Policy string `json:"policy"`
	Key    string `json:"key"`
	Cost   *int64 `json:"cost"`
	Plan   string `json:"plan"` // the key's plan, for a policy with plans
}

// checkRequest is the body of POST /v1/check: either one check inline or a
// list of checks decided all or nothing.
type checkRequest struct {
	checkJSON
	Checks []checkJSON `json:"checks"`
}

// The fields of a check and of the body of POST /v1/check, for decodeStrict.
var (
	checkFields        = []field{{name: "policy"}, {name: "key"}, {name: "cost", kind: kindInteger}, {name: "plan"}}
	checkRequestFields = append(checkFields[:len(checkFields):len(checkFields)],
		field{name: "checks", kind: kindObjects, inner: checkFields})
)

// resultJSON is one check's decision in the response.
type resultJSON struct {
	Policy       string `json:"policy"`
	Key          string `json:"key"`
	Allowed      bool   `json:"allowed"`
	Shadow       bool   `json:"shadow,omitempty"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	ResetAfterMS int64  `json:"reset_after_ms"`
	DelayMS      int64  `json:"delay_ms"`
	// Degraded: the store could not decide and the fail policy did (see
	// failover): the limit was not enforced on the shared count.
	Degraded bool `json:"degraded,omitempty"`
	// ReleaseToken gives back the in-flight slot an admitted check of a
	// concurrency policy holds (POST /v1/release).
	ReleaseToken string `json:"release_token,omitempty"`
}

// checkResponse is the body of a decision: allowed tells the request's fate;
// retry_after_ms (when denied) is when the whole set of checks passes.
type checkResponse struct {
	Allowed      bool         `json:"allowed"`
	RetryAfterMS int64        `json:"retry_after_ms,omitempty"`
	Checks       []resultJSON `json:"checks"`
}

// apiError is the body of every error answer.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func writeError(w http.ResponseWriter, status int, e *apiError) {
	writeJSON(w, status, map[string]*apiError{"error": e})
}

// decodeCheckRequest parses and validates a /v1/check body against cfg. It
// returns the checks, or the status and error to answer with.
func decodeCheckRequest(body []byte, cfg *config.Config, maxChecks int) ([]engine.Check, int, *apiError) {
	var req checkRequest
	if err := decodeStrict(body, checkRequestFields, &req); err != nil {
		return nil, http.StatusBadRequest, &apiError{Code: "malformed_json", Message: jsonMessage(err)}
	}
	inline := req.Policy != "" || req.Key != "" || req.Cost != nil || req.Plan != ""
	var items []checkJSON
	var prefix string
	switch {
	case inline && req.Checks != nil:
		return nil, http.StatusBadRequest, &apiError{Code: "invalid_request", Field: "checks",
			Message: `give either one check ("policy", "key", "cost") or "checks", not both`}
	case inline:
		items = []checkJSON{req.checkJSON}
	case len(req.Checks) == 0:
		return nil, http.StatusBadRequest, &apiError{Code: "invalid_request", Field: "policy",
			Message: `the body needs "policy" and "key", or a non-empty "checks" list`}
	case len(req.Checks) > maxChecks:
		return nil, http.StatusBadRequest, &apiError{Code: "too_many_checks", Field: "checks",
			Message: fmt.Sprintf("%d checks; at most %d per request", len(req.Checks), maxChecks)}
	default:
		items, prefix = req.Checks, "checks"
	}
	checks := make([]engine.Check, len(items))
	for i, it := range items {
		field := func(name string) string {
			if prefix == "" {
				return name
			}
			return fmt.Sprintf("%s[%d].%s", prefix, i, name)
		}
		if it.Policy == "" {
			return nil, http.StatusBadRequest, &apiError{Code: "invalid_request", Field: field("policy"), Message: "policy is required"}
		}
		p := cfg.Policy(it.Policy)
		if p == nil {
			return nil, http.StatusNotFound, &apiError{Code: "unknown_policy", Field: field("policy"),
				Message: fmt.Sprintf("no policy named %q (GET /v1/policies lists them)", truncate(it.Policy, 200))}
		}
		cost := int64(1)
		if it.Cost != nil {
			cost = *it.Cost
		}
		checks[i] = engine.Check{Policy: p, Key: it.Key, Cost: cost, Plan: it.Plan}
	}
	return checks, 0, nil
}

// jsonMessage turns a decoding error into a message for the client.
func jsonMessage(err error) string {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d: %v", syn.Offset, syn)
	case errors.Is(err, io.EOF):
		return "the body is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends in the middle of a value"
	default:
		return err.Error()
	}
}

func (a *api) check(w http.ResponseWriter, r *http.Request) {
	// The body is read as JSON whatever its Content-Type says: curl -d sends
	// application/x-www-form-urlencoded, and refusing that helps nobody.
	body, ok := a.readBody(w, r)
	if !ok {
		return
	}
	checks, status, apiErr := decodeCheckRequest(body, a.svc.Config(), a.maxChecks)
	if apiErr != nil {
		writeError(w, status, apiErr)
		return
	}
	// Resolved first, so that the fields advertise the limits the decision
	// was made under even if an override changes meanwhile.
	a.svc.Resolve(checks)
	results := make([]sluice.Result, len(checks))
	allowed, err := a.svc.Decide(r.Context(), checks, results)
	if err != nil {
		a.writeDecideError(w, err, len(checks) > 1)
		return
	}
	resp := checkResponse{Allowed: allowed, Checks: make([]resultJSON, len(checks))}
	quotas := make([]httplimit.Quota, 0, len(checks))
	var retry time.Duration
	for i, c := range checks {
		res := results[i]
		resp.Checks[i] = resultJSON{Policy: c.Policy.Name, Key: c.Key, Allowed: res.Allowed, Shadow: c.Policy.Shadow,
			Limit: res.Limit, Remaining: res.Remaining, RetryAfterMS: ceilMS(res.RetryAfter),
			ResetAfterMS: ceilMS(res.ResetAfter), DelayMS: ceilMS(res.Delay), Degraded: res.Degraded, ReleaseToken: c.Token}
		if c.Policy.Shadow {
			continue // never enforced, so not advertised to the client
		}
		quotas = append(quotas, httplimit.Quota{Policy: &c.Applied().Policy, Result: res})
		if !allowed {
			retry = max(retry, res.RetryAfter)
		}
	}
	status = http.StatusOK
	if !allowed {
		status = http.StatusTooManyRequests
		resp.RetryAfterMS = ceilMS(retry)
	}
	httplimit.SetHeaders(w.Header(), quotas, retry)
	writeJSON(w, status, resp)
}

// readBody reads r's body within its bound, or answers why it cannot.
func (a *api) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, &apiError{Code: "body_too_large",
				Message: fmt.Sprintf("the body is over %d bytes", a.maxBody)})
			return nil, false
		}
		writeError(w, http.StatusBadRequest, &apiError{Code: "unreadable_body", Message: err.Error()})
		return nil, false
	}
	return body, true
}

func (a *api) writeDecideError(w http.ResponseWriter, err error, batch bool) {
	var ce *engine.CheckError
	if errors.As(err, &ce) {
		field := "key"
		switch {
		case errors.Is(err, sluice.ErrInvalidCost), errors.Is(err, sluice.ErrExceedsCapacity):
			field = "cost"
		}
		if batch {
			field = fmt.Sprintf("checks[%d].%s", ce.Index, field)
		}
		writeError(w, http.StatusBadRequest, &apiError{Code: "invalid_check", Field: field, Message: ce.Err.Error()})
		return
	}
	var closed *failover.UnavailableError
	if errors.As(err, &closed) {
		// store.on_error: closed. The request is denied, and the status says
		// it was the store, not the limit: 503, not 429.
		w.Header().Set("Retry-After", strconv.FormatInt(max(1, httplimit.Seconds(closed.RetryAfter)), 10))
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"allowed": false, "error": &apiError{Code: "store_unavailable",
			Message: "the rate limit store cannot decide and store.on_error is closed: denied: " + err.Error()}})
		return
	}
	a.svc.Logger().Error("store failure", "error", err)
	writeError(w, http.StatusServiceUnavailable, &apiError{Code: "store_unavailable", Message: err.Error()})
}

// ceilMS rounds up to whole milliseconds: a client that waits the advertised
// time must never come back early.
func ceilMS(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
