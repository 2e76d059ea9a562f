package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/service"
)

// Option configures New and ForwardAuth.
type Option func(*options)

type options struct {
	logger      *slog.Logger // nil: the service's
	transport   http.RoundTripper
	minBodyRate int64 // bytes per second; 0: no minimum
	bodyGrace   time.Duration
}

// Logger sets the logger for upstream failures and the limiter's own errors
// (the service's logger otherwise).
func Logger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// Transport sets how requests reach the upstream (NewTransport() otherwise).
func Transport(rt http.RoundTripper) Option { return func(o *options) { o.transport = rt } }

// New returns a handler that limits requests by the routes of the proxy:
// section of svc's configuration and forwards those admitted to upstream,
// an http or https URL (its path, if any, prefixes every request's).
// Decisions go through svc's engine, as the HTTP API's and Envoy's do: they
// honour runtime overrides and count in svc's metrics, and the routes follow
// a reload of the configuration. Several proxies on one shared store (Redis)
// enforce one limit together.
func New(svc *service.Service, upstream *url.URL, opts ...Option) (http.Handler, error) {
	if err := checkUpstream(upstream); err != nil {
		return nil, err
	}
	o := newOptions(svc, opts)
	if o.transport == nil {
		o.transport = NewTransport()
	}
	h, err := newHandler(svc, newReverseProxy(upstream, o.transport, o.logger), httplimit.WriteDenial, o.logger, true)
	if err != nil {
		return nil, err
	}
	return o.bodyRate(h), nil
}

func newOptions(svc *service.Service, opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = svc.Logger()
	}
	return o
}

func checkUpstream(u *url.URL) error {
	if u == nil {
		return errors.New("proxy: upstream URL is nil")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("proxy: upstream %s: want an http:// or https:// URL", u.Redacted())
	}
	if u.Host == "" {
		return fmt.Errorf("proxy: upstream %s: no host", u.Redacted())
	}
	return nil
}
