package proxy

import (
	"fmt"
	"net/http"
	"net/url"

	"golang.org/x/net/http/httpguts"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/service"
)

// Paths of the forward-auth endpoint. ForwardAuthPath answers a denial with
// 429, as Traefik's ForwardAuth and Caddy's forward_auth pass it on to the
// client; ForwardAuthNginxPath answers 403, the only denial nginx's
// auth_request understands, with the same header fields.
const (
	ForwardAuthPath      = "/v1/forward-auth"
	ForwardAuthNginxPath = "/v1/forward-auth/nginx"
)

// Header fields a gateway uses to describe the request it asks about.
const (
	HeaderForwardedMethod = "X-Forwarded-Method"
	HeaderForwardedHost   = "X-Forwarded-Host"
	HeaderForwardedURI    = "X-Forwarded-Uri"
)

// ProblemBadForwardAuth is the problem type (RFC 9457) of the forward-auth
// endpoint's answer to a request that does not say which request it asks
// about: a gateway that is not configured to send X-Forwarded-Method and
// X-Forwarded-Uri.
const ProblemBadForwardAuth = "tag:sluicehq.github.io,2026:bad-forward-auth-request"

// ForwardAuth returns the handler of a forward-auth endpoint for gateways
// other than Envoy: Traefik (ForwardAuth), Caddy (forward_auth) and nginx
// (auth_request). The gateway asks it about each request before passing the
// request on; the handler rebuilds that request from X-Forwarded-Method,
// X-Forwarded-Uri and X-Forwarded-Host and the other header fields, routes
// it through the routes of the proxy: section of svc's configuration and
// decides it through svc's engine exactly as New does, and answers
//
//   - 200 with RateLimit-Policy and RateLimit when the request is admitted
//     (or matches no limited route), after a leaky bucket's delay if any;
//   - 429 with Retry-After, the RateLimit fields and a problem+json body
//     when it is denied, on ForwardAuthPath; 403 with the same fields on
//     ForwardAuthNginxPath;
//   - 400 when X-Forwarded-Method or X-Forwarded-Uri is missing or
//     malformed, so that a misconfigured gateway lets nothing through.
//
// The client address for ip keys is read as the proxy reads it: the gateway
// is the peer, so it must be in the configuration's proxy.trusted_proxies
// for the client address it writes in X-Forwarded-For to be believed;
// otherwise every request counts as the gateway's.
func ForwardAuth(svc *service.Service, opts ...Option) (http.Handler, error) {
	o := newOptions(svc, opts)
	std, err := newHandler(svc, http.HandlerFunc(allow), httplimit.WriteDenial, o.logger, false)
	if err != nil {
		return nil, err
	}
	nginx, err := newHandler(svc, http.HandlerFunc(allow), denyNginx, o.logger, false)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(ForwardAuthPath, forwardAuth{std})
	mux.Handle(ForwardAuthNginxPath, forwardAuth{nginx})
	return o.bodyRate(mux), nil
}

// forwardAuth answers for the request a gateway describes.
type forwardAuth struct{ routes *handler }

func (f forwardAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	orig, err := ForwardedRequest(r)
	if err != nil {
		writeBadRequest(w, err)
		return
	}
	f.routes.ServeHTTP(w, orig)
}

// allow answers an admitted request: the handler has set the RateLimit
// fields already.
func allow(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// denyNginx answers a denial with 403, since auth_request treats any status
// but 2xx, 401 and 403 as an error (500 to the client). The handler has
// set Retry-After and the RateLimit fields, which the documented
// configuration turns into the client's 429.
func denyNginx(w http.ResponseWriter, _ *http.Request, _ httplimit.Denial) {
	w.WriteHeader(http.StatusForbidden)
}

// ForwardedRequest rebuilds the request a gateway asks about from the
// forward-auth request r: the method from X-Forwarded-Method, the path and
// query from X-Forwarded-Uri (origin form, "/path?query") and the host from
// X-Forwarded-Host (r's own when absent). Every header field, and the peer
// address, stay r's. It fails when the method or URI is missing or is not
// one, as a gateway that sends neither is misconfigured.
func ForwardedRequest(r *http.Request) (*http.Request, error) {
	method := r.Header.Get(HeaderForwardedMethod)
	if method == "" {
		return nil, fmt.Errorf("no %s header: configure the gateway to send the original request's method", HeaderForwardedMethod)
	}
	if !httpguts.ValidHeaderFieldName(method) {
		return nil, fmt.Errorf("%s %q is not an HTTP method", HeaderForwardedMethod, method)
	}
	uri := r.Header.Get(HeaderForwardedURI)
	if uri == "" {
		return nil, fmt.Errorf("no %s header: configure the gateway to send the original request's path and query", HeaderForwardedURI)
	}
	// Origin form only: an absolute URI or "*" names no path to route on.
	if uri[0] != '/' {
		return nil, fmt.Errorf("%s %q: want a path such as /api/items?page=2", HeaderForwardedURI, uri)
	}
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %v", HeaderForwardedURI, uri, unwrapURLError(err))
	}
	orig := new(http.Request)
	*orig = *r
	orig.Method = method
	orig.URL = u
	orig.RequestURI = uri
	if host := r.Header.Get(HeaderForwardedHost); host != "" {
		orig.Host = host
	}
	return orig, nil
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

func writeBadRequest(w http.ResponseWriter, err error) {
	writeProblem(w, ProblemBadForwardAuth, http.StatusBadRequest, err.Error())
}
