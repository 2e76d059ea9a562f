package envoyrls

import (
	"errors"
	"io"
	"net/http"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// maxJSONBody caps a /json request: Envoy's requests are a few hundred
// bytes, and the descriptor caps bound what a larger one could ask anyway.
const maxJSONBody = 64 << 10

// JSONHandler is envoyproxy/ratelimit's /json endpoint, for clients that
// cannot speak gRPC and for checks by hand: POST a RateLimitRequest in
// protobuf's JSON form and get the RateLimitResponse back in the same form,
// decided exactly as ShouldRateLimit decides it. The status is 200 when the
// overall code is OK and 429 when it is OVER_LIMIT, as ratelimit answers; a
// body that is not a RateLimitRequest (unknown fields included) or one the
// API refuses (no domain, no descriptors) is a 400 with the reason in plain
// text, a body over 64 KiB a 413, and a store that cannot decide a 503.
func (s *Server) JSONHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
		if err != nil {
			if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
				http.Error(w, "request body over 64 KiB", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		var req rlsv3.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			http.Error(w, "not a RateLimitRequest: "+err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := s.ShouldRateLimit(r.Context(), &req)
		if err != nil {
			code := http.StatusInternalServerError
			switch status.Code(err) {
			case codes.InvalidArgument:
				code = http.StatusBadRequest
			case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded:
				code = http.StatusServiceUnavailable
			}
			http.Error(w, status.Convert(err).Message(), code)
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			http.Error(w, "encoding the response: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if resp.GetOverallCode() == codeOverLimit {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		_, _ = w.Write(out) // the client may be gone; nothing to do then
	})
}
