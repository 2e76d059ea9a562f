package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/limitcore"
)

// routes are the routes of one configuration's proxy: section, ready to
// match requests and key them.
type routes struct {
	cfg     *config.Config // built from
	list    []route
	trusted []netip.Prefix // the proxies whose X-Forwarded-For is believed
}

// route is a configured route: what it matches and the limits it applies
// (none: unlimited by design, see config.Route.Limits).
type route struct {
	prefix  string
	methods []string
	headers map[string]string
	limits  []routeLimit
}

// routeLimit is one limit of a route: its policy in the configuration, how
// a request is keyed for it, and the header naming the key's plan.
type routeLimit struct {
	policy     *config.Policy
	key        limitcore.KeyFunc[*request]
	fallback   limitcore.KeyFunc[*request] // nil: none
	planHeader string                      // canonical; "": the policy's plans do not apply
	// chargeHeader names the upstream response header whose usage is
	// charged when the response ends (canonical); "": none.
	chargeHeader string
	cost         int64 // units a request is checked for; 0: a peek
}

// request is one request as the keys see it. The client address is worked
// out once, and only if a key asks for it.
type request struct {
	*http.Request
	trusted []netip.Prefix
	ip      netip.Addr
	ipDone  bool
}

func (q *request) clientIP() netip.Addr {
	if !q.ipDone {
		q.ip = httplimit.ClientIP(q.Request, q.trusted, httplimit.HeaderXForwardedFor)
		q.ipDone = true
	}
	return q.ip
}

// v6Bits is how many leading bits of an IPv6 client address key it: one
// subscriber usually has a whole /64.
const v6Bits = 64

// buildRoutes reads the routes of cfg.Proxy.
func buildRoutes(cfg *config.Config) (*routes, error) {
	if cfg == nil || cfg.Proxy == nil {
		return nil, errors.New("proxy: the configuration has no proxy: section")
	}
	rs := &routes{cfg: cfg}
	cidrs := make([]string, len(cfg.Proxy.TrustedProxies))
	for i, p := range cfg.Proxy.TrustedProxies {
		cidrs[i] = p.String()
	}
	trusted, err := httplimit.TrustedPrefixes(cidrs...)
	if err != nil {
		return nil, fmt.Errorf("proxy: trusted_proxies: %w", err)
	}
	rs.trusted = trusted
	for i, rc := range cfg.Proxy.Routes {
		rt, err := buildRoute(cfg, rc)
		if err != nil {
			return nil, fmt.Errorf("proxy: route %d (%s:%d): %w", i, cfg.Proxy.File, rc.Line, err)
		}
		rs.list = append(rs.list, rt)
	}
	return rs, nil
}

func buildRoute(cfg *config.Config, rc *config.Route) (route, error) {
	rt := route{prefix: rc.PathPrefix, methods: rc.Methods, headers: rc.Headers}
	if rt.prefix != "" {
		rt.prefix = matchPath(rt.prefix)
	}
	for _, lc := range rc.Limits {
		pol := cfg.Policy(lc.Policy)
		if pol == nil { // config.Load rejects this; a hand-built Config may not
			return route{}, fmt.Errorf("unknown policy %q", lc.Policy)
		}
		l := routeLimit{policy: pol, planHeader: lc.PlanHeaderOf(pol), chargeHeader: lc.ChargeHeader, cost: lc.Cost}
		var err error
		if l.key, err = keyOf(lc.Key); err != nil {
			return route{}, fmt.Errorf("policy %q: key: %w", lc.Policy, err)
		}
		if len(lc.Fallback) > 0 {
			if l.fallback, err = keyOf(lc.Fallback); err != nil {
				return route{}, fmt.Errorf("policy %q: fallback: %w", lc.Policy, err)
			}
		}
		if l.planHeader != "" && pol.Plans == nil { // config.Load refuses this; a hand-built Config may not
			return route{}, fmt.Errorf("policy %q has no plans for plan header %s", pol.Name, l.planHeader)
		}
		rt.limits = append(rt.limits, l)
	}
	return rt, nil
}

// keyOf turns a configured key into a key function: each part is the
// client address (ip), a header's first value, or the one global bucket,
// and parts are joined as httplimit.Keys joins them.
func keyOf(spec config.KeySpec) (limitcore.KeyFunc[*request], error) {
	parts := make([]limitcore.KeyFunc[*request], len(spec))
	for i, p := range spec {
		switch p.Kind {
		case config.KeyIP:
			parts[i] = func(q *request) (string, error) {
				ip := q.clientIP()
				if !ip.IsValid() {
					return "", nil
				}
				return limitcore.IPKey(ip, v6Bits), nil
			}
		case config.KeyHeader:
			name := http.CanonicalHeaderKey(p.Header)
			parts[i] = func(q *request) (string, error) {
				if v := q.Header[name]; len(v) > 0 {
					return v[0], nil
				}
				return "", nil
			}
		case config.KeyGlobal:
			parts[i] = func(*request) (string, error) { return "global", nil }
		default:
			return nil, fmt.Errorf("unknown key part %q", p.Kind)
		}
	}
	switch len(parts) {
	case 0:
		return nil, errors.New("empty key")
	case 1:
		return parts[0], nil // no combination: the bucket is the value itself
	}
	return limitcore.Join(parts...), nil
}

// match returns the first route r takes, or nil.
func (rs *routes) match(r *http.Request) *route {
	p := matchPath(r.URL.Path)
	for i := range rs.list {
		if rs.list[i].matches(r, p) {
			return &rs.list[i]
		}
	}
	return nil
}

// matches reports whether r, whose path read as matchPath reads it is p,
// takes rt; rt.prefix was read the same way.
func (rt *route) matches(r *http.Request, p string) bool {
	if !strings.HasPrefix(p, rt.prefix) {
		return false
	}
	if len(rt.methods) > 0 && !slices.Contains(rt.methods, r.Method) {
		return false
	}
	for name, want := range rt.headers {
		if !slices.Contains(r.Header[name], want) {
			return false
		}
	}
	return true
}
