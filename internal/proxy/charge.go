package proxy

import (
	"context"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/limitcore"
)

// charged is a check of an admitted request whose limit is charged from the
// upstream's response: the usage in header (canonical) is charged to the
// check's key when the response ends.
type charged struct {
	check  *engine.Check
	header string
}

// charge charges, through the engine, the usage the upstream's response
// reported for each charged check: read from w's header once the reverse
// proxy has copied the response there (a trailer too, once the body is
// copied). It runs when the request ends, however it ends — a client gone
// mid-body included (the reverse proxy then panics with
// http.ErrAbortHandler) — and even when the client has gone. A value that
// is not a non-negative integer, or a failed charge, is logged: the answer
// is already sent.
func (h *handler) charge(w http.ResponseWriter, r *http.Request, cs []charged) {
	ctx := context.WithoutCancel(r.Context())
	checks := make([]engine.Check, 0, len(cs))
	for _, c := range cs {
		n, _, err := limitcore.ParseUsage(w.Header(), c.header)
		if err != nil {
			h.log.WarnContext(ctx, "proxy: the upstream's usage cannot be read; nothing is charged", "policy", c.check.Policy.Name, "err", err)
			continue
		}
		if n > 0 {
			checks = append(checks, engine.Check{Policy: c.check.Policy, Key: c.check.Key, Plan: c.check.Plan, Cost: n})
		}
	}
	if len(checks) == 0 {
		return
	}
	if err := h.svc.Charge(ctx, checks, make([]sluice.Result, len(checks))); err != nil {
		h.log.ErrorContext(ctx, "proxy: charging the upstream's usage failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
}

// chargedOf returns the checks charged from the response (headers[i] is
// checks[i]'s charge header), or nil for none.
func chargedOf(checks []engine.Check, headers []string) []charged {
	var cs []charged
	for i, name := range headers {
		if name != "" {
			cs = append(cs, charged{check: &checks[i], header: name})
		}
	}
	return cs
}
