package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// ProblemUpstream is the problem type (RFC 9457) of the proxy's answer when
// the upstream cannot be reached or fails to answer; like httplimit's, a tag
// URI to match on.
const ProblemUpstream = "tag:sluicehq.github.io,2026:upstream-unavailable"

// NewTransport returns the default transport to the upstream: bounded
// connect, TLS and response-header waits, so a dead upstream fails requests
// quickly instead of piling them up, and a large idle pool, since every
// request goes to the same host. It ignores HTTP_PROXY (the upstream is
// named explicitly) and never adds Accept-Encoding: the upstream gets the
// client's request as sent.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 10 * time.Second
	// Long enough for slow endpoints, short enough that a hung upstream
	// does not hold connections forever. Streaming responses are not cut:
	// this bounds only the wait for the response's header.
	t.ResponseHeaderTimeout = 60 * time.Second
	t.MaxIdleConns = 512
	t.MaxIdleConnsPerHost = 256
	t.IdleConnTimeout = 90 * time.Second
	t.DisableCompression = true
	return t
}

// newReverseProxy forwards to upstream with the standard rewrite: the
// upstream's scheme, host and path prefix, X-Forwarded-* set.
func newReverseProxy(upstream *url.URL, rt http.RoundTripper, log *slog.Logger) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.SetXForwarded()
		},
		Transport:    rt,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandler: upstreamError(log),
	}
}

// upstreamError answers a request the upstream did not answer: 504 when it
// timed out, 502 otherwise, with a problem+json body that does not leak the
// upstream's address or the error.
func upstreamError(log *slog.Logger) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		status, detail := http.StatusBadGateway, "The upstream could not be reached or failed to answer."
		var ne net.Error
		switch {
		case errors.Is(err, ErrBodyTooSlow) || bodyTooSlow(r):
			// The client's fault, not the upstream's: it may never read
			// the answer, but gets the right one.
			status, detail = http.StatusRequestTimeout, "The request body arrived too slowly."
			w.Header().Set("Connection", "close")
			log.DebugContext(r.Context(), "proxy: request body too slow", "method", r.Method, "path", r.URL.Path)
		case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
			// The client left: nobody reads the answer, and it is not an
			// upstream failure worth a warning.
			log.DebugContext(r.Context(), "proxy: client went away", "method", r.Method, "path", r.URL.Path)
		case errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded):
			status, detail = http.StatusGatewayTimeout, "The upstream did not answer in time."
			log.WarnContext(r.Context(), "proxy: upstream timed out", "method", r.Method, "path", r.URL.Path, "err", err)
		default:
			log.WarnContext(r.Context(), "proxy: upstream failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		writeProblem(w, ProblemUpstream, status, detail)
	}
}

// writeProblem answers with an RFC 9457 problem+json body.
func writeProblem(w http.ResponseWriter, typ string, status int, detail string) {
	body, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{typ, http.StatusText(status), status, detail})
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(body)
}
