package httpapi

import (
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
)

// chargeJSON is the body of POST /v1/charge: usage that already happened,
// cost units of key under policy (the key's plan for a policy with plans).
// Cost is required: a charge says how much was used.
type chargeJSON struct {
	Policy string `json:"policy"`
	Key    string `json:"key"`
	Cost   *int64 `json:"cost"`
	Plan   string `json:"plan"`
}

var chargeFields = checkFields // the same fields as a check, read strictly

// chargeResponse is the answer to a charge: what is left of the limit after
// it, negative while the key owes units; when one unit is admitted again;
// when the key is back to its initial state.
type chargeResponse struct {
	Policy string `json:"policy"`
	Key    string `json:"key"`
	// Fitted: the cost fitted what was left (a decision would have
	// admitted it). Otherwise the key may owe units.
	Fitted       bool  `json:"fitted"`
	Limit        int64 `json:"limit"`
	Remaining    int64 `json:"remaining"`
	RetryAfterMS int64 `json:"retry_after_ms"`
	ResetAfterMS int64 `json:"reset_after_ms"`
	Degraded     bool  `json:"degraded,omitempty"`
}

// decodeChargeRequest parses and validates a /v1/charge body against cfg:
// the charge as an engine check, or the status and error to answer with.
func decodeChargeRequest(body []byte, cfg *config.Config) (engine.Check, int, *apiError) {
	var req chargeJSON
	if err := decodeStrict(body, chargeFields, &req); err != nil {
		return engine.Check{}, http.StatusBadRequest, &apiError{Code: "malformed_json", Message: jsonMessage(err)}
	}
	switch {
	case req.Policy == "":
		return engine.Check{}, http.StatusBadRequest, &apiError{Code: "invalid_request", Field: "policy", Message: "policy is required"}
	case req.Cost == nil:
		return engine.Check{}, http.StatusBadRequest, &apiError{Code: "invalid_request", Field: "cost",
			Message: "cost is required: the units used"}
	}
	p := cfg.Policy(req.Policy)
	if p == nil {
		return engine.Check{}, http.StatusNotFound, &apiError{Code: "unknown_policy", Field: "policy",
			Message: fmt.Sprintf("no policy named %q (GET /v1/policies lists them)", truncate(req.Policy, 200))}
	}
	return engine.Check{Policy: p, Key: req.Key, Cost: *req.Cost, Plan: req.Plan}, 0, nil
}

// charge answers POST /v1/charge: the usage is recorded by the engine even
// beyond the limit (a key that used more than was left owes the excess, and
// its checks are denied until time repays it), and the answer says what is
// left. A charge is never refused for its size: 200 whenever it was
// recorded.
func (a *api) charge(w http.ResponseWriter, r *http.Request) {
	body, ok := a.readBody(w, r)
	if !ok {
		return
	}
	check, status, apiErr := decodeChargeRequest(body, a.svc.Config())
	if apiErr != nil {
		writeError(w, status, apiErr)
		return
	}
	checks := []engine.Check{check}
	a.svc.Resolve(checks)
	results := make([]sluice.Result, 1)
	if err := a.svc.Charge(r.Context(), checks, results); err != nil {
		a.writeDecideError(w, err, false)
		return
	}
	res, c := results[0], &checks[0]
	if !c.Policy.Shadow {
		httplimit.SetHeaders(w.Header(), []httplimit.Quota{{Policy: &c.Applied().Policy, Result: res}}, 0)
	}
	writeJSON(w, http.StatusOK, chargeResponse{Policy: c.Policy.Name, Key: c.Key, Fitted: res.Allowed,
		Limit: res.Limit, Remaining: res.Remaining, RetryAfterMS: ceilMS(res.RetryAfter),
		ResetAfterMS: ceilMS(res.ResetAfter), Degraded: res.Degraded})
}
