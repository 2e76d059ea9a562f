package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
)

// Option configures New.
type Option func(*options)

type options struct {
	logger      *slog.Logger
	transport   http.RoundTripper
	limitOpts   []httplimit.Option
	minBodyRate int64 // bytes per second; 0: no minimum
	bodyGrace   time.Duration
}

// Logger sets the logger for upstream failures and the limiter's own errors
// and shadow denials (slog.Default() otherwise).
func Logger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// Transport sets how requests reach the upstream (NewTransport() otherwise).
func Transport(rt http.RoundTripper) Option { return func(o *options) { o.transport = rt } }

// LimitOptions adds options to every route's httplimit.Middleware, such as
// httplimit.WithLegacyHeaders() or httplimit.WithMaxDelay. Do not pass Limit or
// TrustedProxies: they come from the configuration.
func LimitOptions(opts ...httplimit.Option) Option {
	return func(o *options) { o.limitOpts = append(o.limitOpts, opts...) }
}

// New returns a handler that limits requests by the routes of cfg.Proxy and
// forwards those admitted to upstream, an http or https URL (its path, if
// any, prefixes every request's). Every limiter uses store, so several
// proxies on one shared store (Redis) enforce one limit together.
func New(cfg *config.Config, store sluice.Store, upstream *url.URL, opts ...Option) (http.Handler, error) {
	if err := checkUpstream(upstream); err != nil {
		return nil, err
	}
	o := newOptions(opts)
	if o.transport == nil {
		o.transport = NewTransport()
	}
	h, err := newRouter(cfg, store, newReverseProxy(upstream, o.transport, o.logger), nil, o)
	if err != nil {
		return nil, err
	}
	return o.bodyRate(h), nil
}

func newOptions(opts []Option) options {
	o := options{logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// newRouter builds the routes of cfg.Proxy in front of next, which serves
// every request that is admitted or matches no route; extra options go to
// every route's middleware after the caller's. Both the proxy and the
// forward-auth endpoint route with it, so they limit a request alike.
func newRouter(cfg *config.Config, store sluice.Store, next http.Handler,
	extra []httplimit.Option, o options) (*handler, error) {
	if cfg == nil || cfg.Proxy == nil {
		return nil, errors.New("proxy: the configuration has no proxy: section")
	}
	if store == nil {
		return nil, errors.New("proxy: store is nil")
	}
	o.limitOpts = append(o.limitOpts[:len(o.limitOpts):len(o.limitOpts)], extra...)
	h := &handler{next: next}
	limiters := map[string]*sluice.Limiter{}
	for i, rc := range cfg.Proxy.Routes {
		rt, err := newRoute(cfg, rc, store, limiters, h.next, o)
		if err != nil {
			return nil, fmt.Errorf("proxy: route %d (%s:%d): %w", i, cfg.Proxy.File, rc.Line, err)
		}
		h.routes = append(h.routes, rt)
	}
	return h, nil
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

// newRoute builds one route: its matcher and, when it has limits, the
// middleware in front of next. One Limiter per policy is shared between
// routes: they are stateless, and the counters live in the store anyway.
func newRoute(cfg *config.Config, rc *config.Route, store sluice.Store,
	limiters map[string]*sluice.Limiter, next http.Handler, o options) (route, error) {
	rt := route{prefix: rc.PathPrefix, methods: rc.Methods, headers: rc.Headers, h: next}
	if rt.prefix != "" {
		rt.prefix = matchPath(rt.prefix)
	}
	if len(rc.Limits) == 0 {
		return rt, nil // unlimited by design: see config.Route.Limits
	}
	mwOpts := []httplimit.Option{httplimit.WithLogger(o.logger)}
	if len(cfg.Proxy.TrustedProxies) > 0 {
		cidrs := make([]string, len(cfg.Proxy.TrustedProxies))
		for i, p := range cfg.Proxy.TrustedProxies {
			cidrs[i] = p.String()
		}
		mwOpts = append(mwOpts, httplimit.WithTrustedProxies(cidrs...))
	}
	for _, lc := range rc.Limits {
		pol := cfg.Policy(lc.Policy)
		if pol == nil { // config.Load rejects this; a hand-built Config may not
			return route{}, fmt.Errorf("unknown policy %q", lc.Policy)
		}
		lim, err := limiterOf(limiters, store, pol, "")
		if err != nil {
			return route{}, err
		}
		key, err := keyOf(lc.Key)
		if err != nil {
			return route{}, fmt.Errorf("policy %q: key: %w", lc.Policy, err)
		}
		var lopts []httplimit.LimitOption
		if len(lc.Fallback) > 0 {
			fb, err := keyOf(lc.Fallback)
			if err != nil {
				return route{}, fmt.Errorf("policy %q: fallback: %w", lc.Policy, err)
			}
			lopts = append(lopts, httplimit.WithFallbackKey(fb))
		}
		if pol.Shadow {
			lopts = append(lopts, httplimit.WithShadow())
		}
		if header := lc.PlanHeaderOf(pol); header != "" {
			pick, err := planPicker(limiters, store, pol, header)
			if err != nil {
				return route{}, err
			}
			lopts = append(lopts, httplimit.WithPlan(pick))
		}
		mwOpts = append(mwOpts, httplimit.Limit(lim, key, lopts...))
	}
	mw, err := httplimit.New(append(mwOpts, o.limitOpts...)...)
	if err != nil {
		return route{}, err
	}
	rt.h = mw.Handler(next)
	return rt, nil
}

// limiterOf returns the limiter of pol under plan ("": the default plan, or
// the policy's own limit without one), made once per store and shared by
// the routes: limiters are stateless, and the counters live in the store.
func limiterOf(limiters map[string]*sluice.Limiter, store sluice.Store, pol *config.Policy, plan string) (*sluice.Limiter, error) {
	id := pol.Name + "\x00" + plan
	if lim := limiters[id]; lim != nil {
		return lim, nil
	}
	lim, err := sluice.New(store, pol.ForPlan(plan))
	if err != nil {
		return nil, err
	}
	limiters[id] = lim
	return lim, nil
}

// planPicker returns the function that picks a request's plan limiter from
// header: a plan of pol's limits, or nil (the default plan's limiter, the
// limit's own) for a missing or unknown plan, whatever its size.
func planPicker(limiters map[string]*sluice.Limiter, store sluice.Store, pol *config.Policy, header string) (func(*http.Request) *sluice.Limiter, error) {
	if pol.Plans == nil { // config.Load refuses this; a hand-built Config may not
		return nil, fmt.Errorf("policy %q has no plans for plan header %s", pol.Name, header)
	}
	byPlan := make(map[string]*sluice.Limiter, len(pol.Plans.Limits))
	for plan := range pol.Plans.Limits {
		lim, err := limiterOf(limiters, store, pol, plan)
		if err != nil {
			return nil, fmt.Errorf("policy %q plan %q: %w", pol.Name, plan, err)
		}
		byPlan[plan] = lim
	}
	return func(r *http.Request) *sluice.Limiter { return byPlan[r.Header.Get(header)] }, nil
}

// keyOf turns a configured key into the middleware's.
func keyOf(spec config.KeySpec) (httplimit.Key, error) {
	keys := make([]httplimit.Key, len(spec))
	for i, p := range spec {
		switch p.Kind {
		case config.KeyIP:
			keys[i] = httplimit.ByIP()
		case config.KeyHeader:
			keys[i] = httplimit.ByHeader(p.Header)
		case config.KeyGlobal:
			keys[i] = httplimit.Global()
		default:
			return httplimit.Key{}, fmt.Errorf("unknown key part %q", p.Kind)
		}
	}
	switch len(keys) {
	case 0:
		return httplimit.Key{}, errors.New("empty key")
	case 1:
		return keys[0], nil // no combination: the bucket is the value itself
	}
	return httplimit.Keys(keys...), nil
}
