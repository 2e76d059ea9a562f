package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/overrides"
)

// The override endpoints (admin token required):
//
//	PUT    /v1/admin/overrides/{policy}   set one, body overrideRequest
//	GET    /v1/admin/overrides[/{policy}] list them
//	DELETE /v1/admin/overrides/{policy}?key=K or ?prefix=P

// overrideRequest is the body of PUT /v1/admin/overrides/{policy}.
type overrideRequest struct {
	Key       *string `json:"key"`
	Prefix    *string `json:"prefix"`
	Limit     int64   `json:"limit"`
	Period    string  `json:"period"`
	Burst     int64   `json:"burst"`
	TTL       string  `json:"ttl"`
	ExpiresAt string  `json:"expires_at"`
	Reason    string  `json:"reason"`
}

var overrideFields = []field{{name: "key"}, {name: "prefix"}, {name: "limit", kind: kindInteger},
	{name: "period"}, {name: "burst", kind: kindInteger}, {name: "ttl"}, {name: "expires_at"}, {name: "reason"}}

// overrideView is one override in answers.
type overrideView struct {
	Policy    string `json:"policy"`
	Key       string `json:"key,omitempty"`
	Prefix    string `json:"prefix,omitempty"`
	Limit     int64  `json:"limit"`
	Period    string `json:"period"`
	PeriodMS  int64  `json:"period_ms"`
	Burst     int64  `json:"burst,omitempty"`
	ExpiresAt string `json:"expires_at,omitempty"`
	Reason    string `json:"reason,omitempty"`
	UpdatedAt string `json:"updated_at"`
}

func viewOf(o overrides.Override) overrideView {
	v := overrideView{Policy: o.Policy, Key: o.Key, Prefix: o.Prefix, Limit: o.Limit, Period: o.Period.String(),
		PeriodMS: o.Period.Milliseconds(), Burst: o.Burst, Reason: o.Reason, UpdatedAt: o.UpdatedAt.UTC().Format(time.RFC3339Nano)}
	if !o.ExpiresAt.IsZero() {
		v.ExpiresAt = o.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	return v
}

// decodeOverride reads a PUT body for policy p, at now.
func decodeOverride(body []byte, p *config.Policy, now time.Time) (overrides.Override, *apiError) {
	var req overrideRequest
	if err := decodeStrict(body, overrideFields, &req); err != nil {
		return overrides.Override{}, &apiError{Code: "malformed_json", Message: jsonMessage(err)}
	}
	invalid := func(field, format string, args ...any) (overrides.Override, *apiError) {
		return overrides.Override{}, &apiError{Code: "invalid_override", Field: field, Message: fmt.Sprintf(format, args...)}
	}
	o := overrides.Override{Limit: req.Limit, Period: p.Period, Burst: req.Burst, Reason: req.Reason}
	if req.Key != nil {
		o.Key = *req.Key
	}
	if req.Prefix != nil {
		o.Prefix = *req.Prefix
	}
	if req.Key != nil && req.Prefix != nil {
		return invalid("key", "give key (one key) or prefix (every key starting with it), not both")
	}
	if req.Period != "" {
		d, err := time.ParseDuration(req.Period)
		if err != nil {
			return invalid("period", "want a Go duration such as \"1m\", got %q", truncate(req.Period, 100))
		}
		o.Period = d
	}
	switch {
	case req.TTL != "" && req.ExpiresAt != "":
		return invalid("ttl", "give ttl or expires_at, not both")
	case req.TTL != "":
		d, err := time.ParseDuration(req.TTL)
		if err != nil || d <= 0 {
			return invalid("ttl", "want a positive Go duration such as \"1h\", got %q", truncate(req.TTL, 100))
		}
		o.ExpiresAt = now.Add(d)
	case req.ExpiresAt != "":
		t, err := time.Parse(time.RFC3339, req.ExpiresAt)
		if err != nil {
			return invalid("expires_at", "want an RFC 3339 time such as \"2030-01-02T15:04:05Z\", got %q", truncate(req.ExpiresAt, 100))
		}
		o.ExpiresAt = t
	}
	if p.DeniesAll() {
		return invalid("policy", "policy %q admits nothing (requests_per_unit: 0); it cannot be overridden", p.Name)
	}
	if err := o.Validate(p.Policy, now); err != nil {
		var e *overrides.Error
		errors.As(err, &e)
		return invalid(e.Field, "%s", e.Reason)
	}
	return o, nil
}

// overridePolicy returns the policy the path names, or answers 404.
func (a *api) overridePolicy(w http.ResponseWriter, r *http.Request) *config.Policy {
	name := r.PathValue("policy")
	p := a.svc.Config().Policy(name)
	if p == nil {
		writeError(w, http.StatusNotFound, &apiError{Code: "unknown_policy", Field: "policy",
			Message: fmt.Sprintf("no policy named %q", truncate(name, 200))})
	}
	return p
}

func (a *api) putOverride(w http.ResponseWriter, r *http.Request) {
	p := a.overridePolicy(w, r)
	if p == nil {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.maxBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, &apiError{Code: "body_too_large", Message: err.Error()})
		return
	}
	ov := a.svc.Overrides()
	o, apiErr := decodeOverride(body, p, ov.Now())
	if apiErr != nil {
		writeError(w, http.StatusBadRequest, apiErr)
		return
	}
	o, err = ov.Put(r.Context(), p.Policy, o)
	if err != nil {
		writeOverrideError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, viewOf(o))
}

func (a *api) listOverrides(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("policy")
	if name != "" && a.overridePolicy(w, r) == nil {
		return
	}
	ov := a.svc.Overrides()
	list := ov.Snapshot().List(name, ov.Now())
	out := make([]overrideView, len(list))
	for i, o := range list {
		out[i] = viewOf(o)
	}
	writeJSON(w, http.StatusOK, map[string]any{"overrides": out})
}

func (a *api) deleteOverride(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("policy")
	q := r.URL.Query()
	key, prefix := q.Has("key"), q.Has("prefix")
	if key == prefix || len(q["key"]) > 1 || len(q["prefix"]) > 1 {
		writeError(w, http.StatusBadRequest, &apiError{Code: "invalid_override", Field: "key",
			Message: "give one key=K (one key) or one prefix=P (a prefix) in the query"})
		return
	}
	target := "k:" + q.Get("key")
	if prefix {
		target = "p:" + q.Get("prefix")
	}
	// A policy removed from the configuration may still have overrides:
	// they can be removed all the same.
	if err := a.svc.Overrides().Delete(r.Context(), name, target); err != nil {
		writeOverrideError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true, "policy": name, "key": q.Get("key"), "prefix": q.Get("prefix")})
}

func writeOverrideError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, overrides.ErrNotFound):
		writeError(w, http.StatusNotFound, &apiError{Code: "unknown_override", Message: err.Error()})
	case errors.Is(err, overrides.ErrFull):
		writeError(w, http.StatusConflict, &apiError{Code: "too_many_overrides", Message: err.Error()})
	case errors.Is(err, overrides.ErrInvalid):
		writeError(w, http.StatusBadRequest, &apiError{Code: "invalid_override", Message: err.Error()})
	default:
		writeError(w, http.StatusServiceUnavailable, &apiError{Code: "store_unavailable", Message: err.Error()})
	}
}
