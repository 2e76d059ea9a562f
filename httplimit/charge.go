package httplimit

import (
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/internal/limitcore"
)

// WithChargeFromHeader charges the limit, when the handler's response has
// ended, what the response reports in header name — the tokens a language
// model used, say — to the key the request was counted under, with
// sluice.Limiter.Charge: usage that already happened, consumed even beyond
// the limit, so that a key that used more than was left owes the excess and
// is denied until time repays it (docs/semantics.md, "Charging usage").
// Check at arrival with a cost of 0 or an estimate (WithCost), and charge
// the real usage after.
//
// The header may be set before the body, or after it as a trailer (declared
// in the Trailer header, or named with http.TrailerPrefix). Its value must be
// one non-negative decimal integer, digits only; any other value (a sign,
// spaces, a unit, two values) is logged through WithLogger's logger and
// charges nothing, as does a response without the header. The charge is made
// even when the client has gone away, and also when the handler panics (with
// what it had set by then); it cannot fail the response, which is already
// sent: a store failure is logged. A concurrency limit cannot take this
// option (New refuses it). The header is sent to the client as the handler
// set it.
func WithChargeFromHeader(name string) LimitOption {
	key := http.CanonicalHeaderKey(name)
	return func(l *limit) {
		l.Usage = func(q *request) (int64, error) {
			n, _, err := limitcore.ParseUsage(q.resp.Header(), key)
			return n, err
		}
	}
}

// WithChargeFunc charges the limit, when the handler's response has ended,
// the usage f computes from the request, the response's status and its
// header (trailers included, as WithChargeFromHeader reads them), as
// WithChargeFromHeader charges a header's. f returns 0 to charge nothing; a
// negative usage is logged and charges nothing.
func WithChargeFunc(f func(r *http.Request, status int, header http.Header) int64) LimitOption {
	return func(l *limit) {
		l.Usage = func(q *request) (int64, error) {
			n := f(q.Request, q.resp.status, q.resp.Header())
			if n < 0 {
				return 0, fmt.Errorf("WithChargeFunc returned %d; want a non-negative usage", n)
			}
			return n, nil
		}
	}
}

// responseWriter remembers the status a handler answered with, for a
// limit charged from its response. Unwrap lets http.ResponseController
// reach the server's writer (hijacking, deadlines), and Flush passes
// through, so streaming handlers keep working.
type responseWriter struct {
	http.ResponseWriter
	status int
}

func (w *responseWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 { // 1xx are informational: the final status comes after
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush sends what is buffered, when the server's writer can.
func (w *responseWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the server's writer, for http.ResponseController.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// next serves the admitted request q with next, charging the limits that
// charge from the response when it ends, however it ends.
func (m *Middleware) next(w http.ResponseWriter, q *request, next http.Handler) {
	if !m.core.Charges() {
		next.ServeHTTP(w, q.Request)
		return
	}
	q.resp = &responseWriter{ResponseWriter: w}
	defer func() {
		if q.resp.status == 0 {
			q.resp.status = http.StatusOK // what the server sends for a handler that wrote nothing
		}
		m.core.Charge(q.Context(), q)
	}()
	next.ServeHTTP(q.resp, q.Request)
}
