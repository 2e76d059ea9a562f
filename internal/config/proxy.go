package config

import (
	"fmt"
	"net/http"
	"net/netip"
	"sort"
	"strings"

	"github.com/sluicehq/sluice"
	"go.yaml.in/yaml/v3"
)

// Proxy is the proxy: section of the native format: which limits `sluice
// proxy` applies to a request before passing it on to the upstream.
//
//	proxy:
//	  trusted_proxies: [10.0.0.0/8]
//	  routes:
//	    - match: {path_prefix: /api/, methods: [POST], headers: {X-Tenant: acme}}
//	      limits:
//	        - {policy: api_per_key, key: "header:X-API-Key", fallback: ip}
//	        - {policy: global_api, key: global}
//	    - limits: [{policy: per_ip, key: ip}]
//
// Routes are tried in order and the first that matches decides; a request
// that matches no route, or matches a route without limits, is passed on
// unlimited. A catch-all route (no match:) last bounds everything else.
type Proxy struct {
	// TrustedProxies are the peers (prefixes; a bare address is a /32 or
	// /128) whose X-Forwarded-For is believed when working out the client
	// address. Empty: the client is always the peer.
	TrustedProxies []netip.Prefix
	// Routes in the order written.
	Routes []*Route
	// File and Line say where the section is.
	File string
	Line int
}

// Route pairs a request matcher with the limits applied to what it matches.
type Route struct {
	// PathPrefix matches requests whose path starts with it ("" matches
	// all). It is compared byte for byte: /api also matches /apix, so write
	// /api/ for a directory.
	PathPrefix string
	// Methods, upper case; empty matches every method.
	Methods []string
	// Headers maps canonical header names to the exact value the request
	// must carry (one of its values); every entry must match.
	Headers map[string]string
	// Limits applied together, all or nothing. Empty: the route is unlimited.
	Limits []*RouteLimit
	// Line is where the route is, in Proxy.File.
	Line int
}

// RouteLimit is one limit of a route: a policy and how requests are keyed.
type RouteLimit struct {
	// Policy names a policy of the configuration (native or Envoy-derived).
	Policy string
	// Key says which bucket a request is counted in.
	Key KeySpec
	// Fallback keys the requests Key has no key for (a missing header);
	// empty: such requests are not counted by this limit.
	Fallback KeySpec
	// PlanHeader names the request header (canonical) holding the key's
	// plan, for a policy with plans; empty: the policy's plans.from.header.
	PlanHeader string
	// ChargeHeader names the upstream response header (canonical) holding
	// the usage the response reports, charged to the request's key when
	// the response ends; empty: nothing is charged after the check.
	ChargeHeader string
	// Cost is the units a request is checked for (default 1). 0 is a peek:
	// the request is admitted while its key has anything left (or owes
	// nothing), and nothing is taken — the check for a limit charged from
	// the response.
	Cost int64
	// Line is where the limit is, in Proxy.File.
	Line int
}

// KeySpec is a parsed key such as "ip", "global", "header:X-API-Key" or a
// combination "ip+header:X-User": each part must be present for the
// request to have a key, and the parts together name its bucket.
type KeySpec []KeyPart

// KeyPart is one part of a KeySpec.
type KeyPart struct {
	// Kind is "ip", "header" or "global".
	Kind string
	// Header is the canonical header name for Kind "header".
	Header string
}

// Key part kinds.
const (
	KeyIP     = "ip"
	KeyHeader = "header"
	KeyGlobal = "global"
)

// String writes the spec back as it is configured.
func (k KeySpec) String() string {
	parts := make([]string, len(k))
	for i, p := range k {
		parts[i] = p.Kind
		if p.Kind == KeyHeader {
			parts[i] += ":" + p.Header
		}
	}
	return strings.Join(parts, "+")
}

// httpMethods are the methods a route may match: RFC 9110's and PATCH. A
// method outside the list is far more likely a typo than a WebDAV verb.
var httpMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace,
}

// proxySection is what a file's proxy: section contributes before merging:
// the policy names it uses are checked once every file's policies are known.
type proxySection struct {
	proxy *Proxy
	key   *yaml.Node  // the proxy: key, for clashes between files
	refs  []policyRef // policy names to resolve after the merge
}

// policyRef is a policy name used by a route limit, with where to blame it.
// plans: the limit names a plan header, so the policy must have plans.
type policyRef struct {
	name   string
	node   *yaml.Node
	field  string
	plans  *yaml.Node
	charge *yaml.Node // charge_header, when set: the policy must take charges
	cost   *yaml.Node // cost, when set: a concurrency policy takes only 1
}

// proxySection reads the proxy: section; nil when it is unusable.
func (p *fileParser) proxySection(n *yaml.Node, key *yaml.Node) *proxySection {
	f, ok := p.mapping(n, "proxy", "trusted_proxies", "routes")
	if !ok {
		return nil
	}
	sec := &proxySection{proxy: &Proxy{File: p.file, Line: key.Line}, key: key}
	if tn := f.get("trusted_proxies"); tn != nil {
		items, _ := p.list(tn, "proxy.trusted_proxies", "addresses or CIDR prefixes")
		for i, item := range items {
			if pf, ok := p.prefix(item, index("proxy.trusted_proxies", i)); ok {
				sec.proxy.TrustedProxies = append(sec.proxy.TrustedProxies, pf)
			}
		}
	}
	if !p.need(f, "routes", "a list of routes, each with match: and limits:") {
		return sec
	}
	items, _ := p.list(f.get("routes"), "proxy.routes", "routes")
	for i, item := range items {
		if r := p.route(item, index("proxy.routes", i), sec); r != nil {
			sec.proxy.Routes = append(sec.proxy.Routes, r)
		}
	}
	return sec
}

// prefix reads a trusted proxy: a CIDR prefix or a bare address.
func (p *fileParser) prefix(n *yaml.Node, path string) (netip.Prefix, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || isNull(n) {
		p.errorf(n, path, "must be an address or CIDR prefix such as 10.0.0.0/8, got %s", describe(n))
		return netip.Prefix{}, false
	}
	if !strings.Contains(n.Value, "/") {
		if a, err := netip.ParseAddr(n.Value); err == nil {
			return netip.PrefixFrom(a, a.BitLen()), true
		}
	} else if pf, err := netip.ParsePrefix(n.Value); err == nil {
		return pf.Masked(), true
	}
	p.errorf(n, path, "not an address or CIDR prefix (such as 10.0.0.0/8 or ::1): %q", n.Value)
	return netip.Prefix{}, false
}

// route reads one route; nil when it has problems.
func (p *fileParser) route(n *yaml.Node, path string, sec *proxySection) *Route {
	f, ok := p.mapping(n, path, "match", "limits")
	if !ok {
		return nil
	}
	r := &Route{Line: f.node.Line}
	valid := true
	if mn := f.get("match"); mn != nil {
		valid = p.match(mn, join(path, "match"), r)
	}
	if ln := f.get("limits"); ln != nil {
		items, ok := p.list(ln, join(path, "limits"), "limits")
		valid = valid && ok
		if ok && len(items) == 0 {
			// An unlimited route is written without limits:, so an empty
			// list is most likely a half-finished edit.
			p.errorf(ln, join(path, "limits"), "empty list; leave limits: out for an unlimited route")
			valid = false
		}
		seen := map[string]int{}
		for i, item := range items {
			l := p.routeLimit(item, index(join(path, "limits"), i), sec)
			if l == nil {
				valid = false
				continue
			}
			if prev, dup := seen[l.Policy]; dup {
				p.errorf(item, index(join(path, "limits"), i)+".policy",
					"policy %q is already a limit of this route (line %d); one policy counts once per request", l.Policy, prev)
				valid = false
				continue
			}
			seen[l.Policy] = l.Line
			r.Limits = append(r.Limits, l)
		}
	}
	if !valid {
		return nil
	}
	return r
}

// match reads a route's match: block into r.
func (p *fileParser) match(n *yaml.Node, path string, r *Route) bool {
	f, ok := p.mapping(n, path, "path_prefix", "methods", "headers")
	if !ok {
		return false
	}
	valid := true
	if s, set := p.str(f, "path_prefix"); set {
		if !strings.HasPrefix(s, "/") {
			p.errorf(f.get("path_prefix"), join(path, "path_prefix"), "must start with /, got %q", s)
			valid = false
		}
		r.PathPrefix = s
	} else if f.has("path_prefix") {
		valid = false
	}
	if mn := f.get("methods"); mn != nil {
		items, ok := p.list(mn, join(path, "methods"), "HTTP methods")
		valid = valid && ok
		for i, item := range items {
			item = deref(item)
			at := index(join(path, "methods"), i)
			switch {
			case item.Kind != yaml.ScalarNode:
				p.errorf(item, at, "must be an HTTP method such as GET, got %s", describe(item))
				valid = false
			case !contains(httpMethods, item.Value):
				hint := ""
				if up := strings.ToUpper(item.Value); contains(httpMethods, up) {
					hint = fmt.Sprintf(" (methods are case-sensitive: write %s)", up)
				}
				p.errorf(item, at, "unknown HTTP method %q%s; want one of %s", item.Value, hint, strings.Join(httpMethods, ", "))
				valid = false
			default:
				r.Methods = append(r.Methods, item.Value)
			}
		}
	}
	if hn := f.get("headers"); hn != nil {
		valid = p.headers(hn, join(path, "headers"), r) && valid
	}
	return valid
}

// headers reads match.headers: header names to exact values.
func (p *fileParser) headers(n *yaml.Node, path string, r *Route) bool {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, path, "must be a mapping of header names to values, got %s", describe(n))
		return false
	}
	valid := true
	r.Headers = map[string]string{}
	lines := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		name := http.CanonicalHeaderKey(k.Value)
		at := join(path, k.Value)
		switch {
		case k.Kind != yaml.ScalarNode || !validHeaderName(k.Value):
			p.errorf(k, path, "not a valid header name: %s", describe(k))
			valid = false
		case lines[name] != 0:
			p.errorf(k, at, "duplicate header (first set at line %d; names are case-insensitive)", lines[name])
			valid = false
		case v.Kind != yaml.ScalarNode || isNull(v):
			p.errorf(v, at, "must be the exact header value to match, got %s", describe(v))
			valid = false
		default:
			lines[name] = k.Line
			r.Headers[name] = v.Value
		}
	}
	return valid
}

// routeLimit reads one limit of a route; nil when it has problems.
func (p *fileParser) routeLimit(n *yaml.Node, path string, sec *proxySection) *RouteLimit {
	f, ok := p.mapping(n, path, "policy", "key", "fallback", "plan_header", "charge_header", "cost")
	if !ok {
		return nil
	}
	l := &RouteLimit{Line: f.node.Line, Cost: 1}
	valid := true
	l.PlanHeader, valid = p.headerName(f, "plan_header")
	if l.ChargeHeader, ok = p.headerName(f, "charge_header"); !ok {
		valid = false
	}
	if f.has("cost") {
		if l.Cost, ok = p.integer(f, "cost"); !ok {
			valid = false
		} else if l.Cost < 0 {
			p.errorf(f.get("cost"), join(path, "cost"), "must be 0 (a peek) or more, got %d", l.Cost)
			valid = false
		}
	}
	if name, set := p.str(f, "policy"); !p.need(f, "policy", "the name of a policy in policies:") || !set {
		valid = false
	} else {
		l.Policy = name
		sec.refs = append(sec.refs, policyRef{name, f.get("policy"), join(path, "policy"), f.get("plan_header"), f.get("charge_header"), f.get("cost")})
	}
	if !p.need(f, "key", `ip, global, header:NAME, or parts joined by +, such as "ip+header:X-User"`) {
		valid = false
	} else if l.Key, ok = p.keySpec(f, "key"); !ok {
		valid = false
	}
	if f.has("fallback") {
		if l.Fallback, ok = p.keySpec(f, "fallback"); !ok {
			valid = false
		}
	}
	if !valid {
		return nil
	}
	return l
}

// keySpec reads and parses a key field.
func (p *fileParser) keySpec(f *fields, key string) (KeySpec, bool) {
	s, set := p.str(f, key)
	if !set {
		return nil, false
	}
	spec, err := ParseKeySpec(s)
	if err != nil {
		p.errorf(f.get(key), join(f.path, key), "%v", err)
		return nil, false
	}
	return spec, true
}

// ParseKeySpec parses a key such as "ip", "global", "header:X-API-Key" or
// "ip+header:X-User". global stands alone: combined with anything it adds
// nothing. A part may appear once.
func ParseKeySpec(s string) (KeySpec, error) {
	const want = `want ip, global, header:NAME, or parts joined by +, such as "ip+header:X-User"`
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty key; %s", want)
	}
	var spec KeySpec
	seen := map[string]bool{}
	for _, raw := range strings.Split(s, "+") {
		part := strings.TrimSpace(raw)
		var kp KeyPart
		switch {
		case part == KeyIP || part == KeyGlobal:
			kp.Kind = part
		case strings.HasPrefix(part, KeyHeader+":"):
			name := strings.TrimSpace(strings.TrimPrefix(part, KeyHeader+":"))
			if !validHeaderName(name) {
				return nil, fmt.Errorf("key part %q: not a valid header name; %s", part, want)
			}
			kp = KeyPart{Kind: KeyHeader, Header: http.CanonicalHeaderKey(name)}
		default:
			return nil, fmt.Errorf("unknown key part %q; %s", part, want)
		}
		id := kp.Kind + ":" + kp.Header
		if seen[id] {
			return nil, fmt.Errorf("key part %q appears twice", part)
		}
		seen[id] = true
		spec = append(spec, kp)
	}
	if len(spec) > 1 && seen[KeyGlobal+":"] {
		return nil, fmt.Errorf("global puts every request in one bucket and cannot be combined with other parts")
	}
	return spec, nil
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// mergeProxy takes the one proxy section of the files and checks its policy
// names against every file's policies: a route may use a policy defined in
// another file, so this waits until all are merged.
func mergeProxy(files []*parsed, policies map[string]*Policy, ps *problems) *Proxy {
	var first *parsed
	for _, f := range files {
		if f.proxy == nil {
			continue
		}
		if first != nil {
			(&fileParser{file: f.file, out: ps}).errorf(f.proxy.key, "proxy",
				"a proxy section is already set in %s:%d; only one file may set it", first.file, first.proxy.key.Line)
			continue
		}
		first = f
	}
	if first == nil {
		return nil
	}
	p := &fileParser{file: first.file, out: ps}
	for _, ref := range first.proxy.refs {
		if pol := policies[ref.name]; pol != nil && pol.Plans == nil && ref.plans != nil {
			p.errorf(ref.plans, strings.TrimSuffix(ref.field, "policy")+"plan_header",
				"policy %q has no plans: add plans: to it, or remove plan_header", ref.name)
		}
		if pol := policies[ref.name]; pol != nil && pol.Algorithm == sluice.Concurrency && ref.charge != nil {
			p.errorf(ref.charge, strings.TrimSuffix(ref.field, "policy")+"charge_header",
				"policy %q is a concurrency limit, which counts requests in flight and cannot be charged usage", ref.name)
		}
		if pol := policies[ref.name]; pol != nil && pol.Algorithm == sluice.Concurrency && ref.cost != nil && ref.cost.Value != "1" {
			p.errorf(ref.cost, strings.TrimSuffix(ref.field, "policy")+"cost",
				"policy %q is a concurrency limit: a request holds one slot, so its cost is 1", ref.name)
		}
		if policies[ref.name] == nil {
			guess := ""
			names := make([]string, 0, len(policies))
			for name := range policies {
				names = append(names, name)
			}
			sort.Strings(names) // so that the guess does not depend on map order
			if s := closest(ref.name, names); s != "" {
				guess = fmt.Sprintf(" (did you mean %s?)", s)
			}
			p.errorf(ref.node, ref.field, "unknown policy %q%s; define it under policies: in one of the files", ref.name, guess)
		}
	}
	return first.proxy.proxy
}
