package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
)

// releaseRequest is the body of POST /v1/release: the slot of (policy, key)
// that release_token holds, as POST /v1/check gave it. plan is the key's
// plan, for a policy with plans, as the check named it.
type releaseRequest struct {
	Policy       string `json:"policy"`
	Key          string `json:"key"`
	Plan         string `json:"plan"`
	ReleaseToken string `json:"release_token"`
}

var releaseFields = []field{{name: "policy"}, {name: "key"}, {name: "plan"}, {name: "release_token"}}

// releaseResponse is the answer to a release: released false means nothing
// changed (the message says why).
type releaseResponse struct {
	Released bool   `json:"released"`
	Message  string `json:"message,omitempty"`
}

// notHeld is what a release that changed nothing says.
const notHeld = "no slot of this policy and key is held by this token: it was released already, its lease ended, or the token is not one this key was given; nothing changed"

// decodeReleaseRequest parses and validates a /v1/release body against cfg.
// It returns the request and its policy, or the status and error to answer
// with. Everything a release could refuse is refused here, before any store
// is asked: a token that is not one the stores give cannot name a slot.
func decodeReleaseRequest(body []byte, cfg *config.Config) (*releaseRequest, *config.Policy, int, *apiError) {
	var req releaseRequest
	if err := decodeStrict(body, releaseFields, &req); err != nil {
		return nil, nil, http.StatusBadRequest, &apiError{Code: "malformed_json", Message: jsonMessage(err)}
	}
	invalid := func(field, msg string) (*releaseRequest, *config.Policy, int, *apiError) {
		return nil, nil, http.StatusBadRequest, &apiError{Code: "invalid_release", Field: field, Message: msg}
	}
	if req.Policy == "" {
		return invalid("policy", "policy is required")
	}
	p := cfg.Policy(req.Policy)
	switch {
	case p == nil:
		return nil, nil, http.StatusNotFound, &apiError{Code: "unknown_policy", Field: "policy",
			Message: fmt.Sprintf("no policy named %q (GET /v1/policies lists them)", truncate(req.Policy, 200))}
	case p.Algorithm != sluice.Concurrency:
		return invalid("policy", fmt.Sprintf("policy %q is %s: only a concurrency policy holds slots to release", p.Name, p.Algorithm))
	case req.Key == "":
		return invalid("key", "key is required")
	case len(req.Key) > sluice.MaxKeyLen:
		return invalid("key", fmt.Sprintf("the key is %d bytes, at most %d", len(req.Key), sluice.MaxKeyLen))
	case req.ReleaseToken == "":
		return invalid("release_token", "release_token is required: the one POST /v1/check answered with")
	case len(req.ReleaseToken) > engine.MaxTokenLen:
		return invalid("release_token", fmt.Sprintf("the token is %d bytes; a release token has at most %d", len(req.ReleaseToken), engine.MaxTokenLen))
	case !tokenText(req.ReleaseToken):
		return invalid("release_token", "a release token holds only lowercase letters, digits and ':'")
	}
	return &req, p, 0, nil
}

// tokenText reports whether s is made of what release tokens are: hex
// digits, and a fail policy's prefix such as "local:".
func tokenText(s string) bool {
	for i := range len(s) {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || c == ':') {
			return false
		}
	}
	return true
}

func (a *api) release(w http.ResponseWriter, r *http.Request) {
	body, ok := a.readBody(w, r)
	if !ok {
		return
	}
	req, p, status, apiErr := decodeReleaseRequest(body, a.svc.Config())
	if apiErr != nil {
		writeError(w, status, apiErr)
		return
	}
	held, err := a.svc.Release(r.Context(), p, req.Key, req.Plan, req.ReleaseToken)
	var ce *engine.CheckError
	switch {
	case errors.As(err, &ce):
		writeError(w, http.StatusBadRequest, &apiError{Code: "invalid_release", Message: ce.Err.Error()})
	case err != nil:
		a.svc.Logger().Error("store failure", "error", err)
		writeError(w, http.StatusServiceUnavailable, &apiError{Code: "store_unavailable",
			Message: err.Error() + "; the slot returns by itself when its lease ends"})
	case held:
		writeJSON(w, http.StatusOK, releaseResponse{Released: true})
	default:
		writeJSON(w, http.StatusOK, releaseResponse{Message: notHeld})
	}
}
