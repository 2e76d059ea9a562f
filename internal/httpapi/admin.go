package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/service"
)

// resetRequest is the body of POST /v1/admin/reset.
type resetRequest struct {
	Policy string `json:"policy"`
	Key    string `json:"key"`
}

// resetFields are the fields of resetRequest, for decodeStrict.
var resetFields = []field{{name: "policy"}, {name: "key"}}

// reset forgets one key's state (behind adminOnly).
func (a *api) reset(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.maxBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, &apiError{Code: "body_too_large", Message: err.Error()})
		return
	}
	var req resetRequest
	if err := decodeStrict(body, resetFields, &req); err != nil {
		writeError(w, http.StatusBadRequest, &apiError{Code: "malformed_json", Message: jsonMessage(err)})
		return
	}
	p := a.svc.Config().Policy(req.Policy)
	if p == nil {
		writeError(w, http.StatusNotFound, &apiError{Code: "unknown_policy", Field: "policy",
			Message: fmt.Sprintf("no policy named %q", truncate(req.Policy, 200))})
		return
	}
	switch err := a.svc.Reset(r.Context(), p, req.Key); {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]any{"reset": true, "policy": p.Name, "key": req.Key})
	case errors.Is(err, engine.ErrStore):
		writeError(w, http.StatusServiceUnavailable, &apiError{Code: "store_unavailable", Message: err.Error()})
	case errors.Is(err, service.ErrResetUnsupported):
		writeError(w, http.StatusNotImplemented, &apiError{Code: "unsupported", Message: err.Error()})
	default:
		writeError(w, http.StatusBadRequest, &apiError{Code: "invalid_check", Field: "key", Message: err.Error()})
	}
}
