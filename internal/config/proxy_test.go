package config

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// proxyPolicies defines policies a and b at lines 1-3; the proxy section
// starts at line 4.
func proxyDoc(lines ...string) string {
	return y(append([]string{
		"policies:",
		"  - {name: a, algorithm: gcra, limit: 10, period: 1m}",
		"  - {name: b, algorithm: fixed_window, limit: 5, period: 1s}",
	}, lines...)...)
}

func TestProxyParses(t *testing.T) {
	cfg, err := Parse("t.yaml", []byte(proxyDoc(
		"proxy:", // 4
		"  trusted_proxies: [10.0.0.0/8, 192.168.1.7, '::1', 172.16.5.4/12]",
		"  routes:",
		"    - match: {path_prefix: /api/, methods: [POST, PUT], headers: {x-tenant: acme}}", // 7
		"      limits:",
		`        - {policy: a, key: "header:x-api-key", fallback: ip}`, // 9
		"        - {policy: b, key: global}",
		"    - match: {path_prefix: /free/}",                       // 11
		"    - limits: [{policy: a, key: ' ip + header:X-User '}]", // 12
	)))
	if err != nil {
		t.Fatal(err)
	}
	want := &Proxy{
		File: "t.yaml", Line: 4,
		TrustedProxies: []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"),
			netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("172.16.0.0/12"),
		},
		Routes: []*Route{
			{PathPrefix: "/api/", Methods: []string{"POST", "PUT"}, Headers: map[string]string{"X-Tenant": "acme"}, Line: 7,
				Limits: []*RouteLimit{
					{Policy: "a", Key: KeySpec{{Kind: KeyHeader, Header: "X-Api-Key"}}, Fallback: KeySpec{{Kind: KeyIP}}, Cost: 1, Line: 9},
					{Policy: "b", Key: KeySpec{{Kind: KeyGlobal}}, Cost: 1, Line: 10},
				}},
			{PathPrefix: "/free/", Line: 11},
			{Line: 12, Limits: []*RouteLimit{
				{Policy: "a", Key: KeySpec{{Kind: KeyIP}, {Kind: KeyHeader, Header: "X-User"}}, Cost: 1, Line: 12},
			}},
		},
	}
	if !reflect.DeepEqual(cfg.Proxy, want) {
		t.Errorf("Proxy =\n%#v\nwant\n%#v", cfg.Proxy, want)
	}
	if s := cfg.Proxy.Routes[2].Limits[0].Key.String(); s != "ip+header:X-User" {
		t.Errorf("KeySpec.String() = %q", s)
	}
}

func TestProxyAlone(t *testing.T) {
	// A file with only a proxy section is a file with something to configure;
	// its policies come from another file (see TestProxyAcrossFiles).
	_, err := Parse("t.yaml", []byte(y("proxy:", "  routes:", "    - match: {path_prefix: /}")))
	if err != nil {
		t.Errorf("proxy section alone: %v", err)
	}
	cfg, err := Parse("t.yaml", []byte(proxyDoc()))
	if err != nil || cfg.Proxy != nil {
		t.Errorf("no proxy section: Proxy = %+v, %v; want nil", cfg.Proxy, err)
	}
}

func TestProxyProblems(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"unknown policy", proxyDoc("proxy:", "  routes:", "    - limits: [{policy: aa, key: ip}]"),
			[]string{`6:25 proxy.routes[0].limits[0].policy: unknown policy "aa" (did you mean a?); define it under policies:`}},
		{"bad key spec", proxyDoc("proxy:", "  routes:", "    - limits:", "        - {policy: a, key: 'iq'}", "        - {policy: b, key: 'header:'}"),
			[]string{
				`7:28 proxy.routes[0].limits[0].key: unknown key part "iq"; want ip, global, header:NAME`,
				`8:28 proxy.routes[0].limits[1].key: key part "header:": not a valid header name`,
			}},
		{"key combos", proxyDoc("proxy:", "  routes:", "    - limits:",
			"        - {policy: a, key: 'global+ip'}", "        - {policy: b, key: ip, fallback: 'ip+ip'}"),
			[]string{
				"7:28 proxy.routes[0].limits[0].key: global puts every request in one bucket and cannot be combined",
				`8:42 proxy.routes[0].limits[1].fallback: key part "ip" appears twice`,
			}},
		{"missing key", proxyDoc("proxy:", "  routes:", "    - limits: [{policy: a}]"),
			[]string{"6:16 proxy.routes[0].limits[0].key: required field is missing; want ip, global"}},
		{"bad CIDR", proxyDoc("proxy:", "  trusted_proxies: [10.0.0.0/33, 'not-an-ip', [1]]", "  routes: []"),
			[]string{
				`5:21 proxy.trusted_proxies[0]: not an address or CIDR prefix (such as 10.0.0.0/8 or ::1): "10.0.0.0/33"`,
				`5:34 proxy.trusted_proxies[1]: not an address or CIDR prefix`,
				`5:47 proxy.trusted_proxies[2]: must be an address or CIDR prefix such as 10.0.0.0/8, got a list`,
			}},
		{"unknown fields", proxyDoc("proxy:", "  route: []", "  routes:", "    - match: {path: /api/}", "      limits: [{policy: a, key: ip, costs: 2}]"),
			[]string{
				"5:3 proxy.route: unknown field (did you mean routes?); allowed here: trusted_proxies, routes",
				"7:15 proxy.routes[0].match.path: unknown field; allowed here: path_prefix, methods, headers",
				"8:37 proxy.routes[0].limits[0].costs: unknown field (did you mean cost?); allowed here: policy, key, fallback",
			}},
		{"bad methods", proxyDoc("proxy:", "  routes:", "    - match: {methods: [get, FETCH]}"),
			[]string{
				`6:25 proxy.routes[0].match.methods[0]: unknown HTTP method "get" (methods are case-sensitive: write GET)`,
				`6:30 proxy.routes[0].match.methods[1]: unknown HTTP method "FETCH"; want one of GET, HEAD`,
			}},
		{"empty limits", proxyDoc("proxy:", "  routes:", "    - {match: {path_prefix: /}, limits: []}"),
			[]string{"6:41 proxy.routes[0].limits: empty list; leave limits: out for an unlimited route"}},
		{"path and headers", proxyDoc("proxy:", "  routes:", "    - match: {path_prefix: api/, headers: {X-A: 1, x-a: 2, 'bad name': v, X-B: [1]}}"),
			[]string{
				`6:28 proxy.routes[0].match.path_prefix: must start with /, got "api/"`,
				"6:52 proxy.routes[0].match.headers.x-a: duplicate header (first set at line 6",
				`6:60 proxy.routes[0].match.headers: not a valid header name: the string "bad name"`,
				"6:80 proxy.routes[0].match.headers.X-B: must be the exact header value to match, got a list",
			}},
		{"same policy twice in a route", proxyDoc("proxy:", "  routes:", "    - limits:", "        - {policy: a, key: ip}", "        - {policy: a, key: global}"),
			[]string{`8:11 proxy.routes[0].limits[1].policy: policy "a" is already a limit of this route (line 7)`}},
		{"no routes", proxyDoc("proxy:", "  trusted_proxies: [10.0.0.0/8]"),
			[]string{"5:3 proxy.routes: required field is missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkProblems(t, parseProblems(t, tc.src), tc.want)
		})
	}
}

func TestProxyAcrossFiles(t *testing.T) {
	files := map[string]string{
		"routes.yaml":   y("proxy:", "  routes:", "    - limits: [{policy: api, key: ip}, {policy: nope, key: ip}]"),
		"policies.yaml": y("policies:", "  - {name: api, algorithm: gcra, limit: 10, period: 1s}"),
		"again.yaml":    y("proxy:", "  routes: []"),
	}
	// The policy is defined in a later file: resolved after the merge.
	paths := write(t, files, "routes.yaml", "policies.yaml")
	if _, err := Load(paths[:1]...); err == nil {
		t.Fatal("routes alone: want unknown policies")
	}
	_, err := Load(paths...)
	var e *Error
	if !errors.As(err, &e) || len(e.Problems) != 1 || e.Problems[0].File != paths[0] || e.Problems[0].Line != 3 ||
		!strings.Contains(e.Problems[0].Message, `unknown policy "nope"`) {
		t.Fatalf("Load = %v; want only the unknown policy nope at %s:3", err, paths[0])
	}

	files["routes.yaml"] = y("proxy:", "  routes:", "    - limits: [{policy: api, key: ip}]")
	paths = write(t, files, "routes.yaml", "policies.yaml", "again.yaml")
	if cfg, err := Load(paths[:2]...); err != nil || cfg.Proxy == nil || cfg.Proxy.Routes[0].Limits[0].Policy != "api" {
		t.Fatalf("Load = %+v, %v", cfg, err)
	}
	_, err = Load(paths...)
	if !errors.As(err, &e) || len(e.Problems) != 1 || e.Problems[0].File != paths[2] || e.Problems[0].Line != 1 ||
		!strings.Contains(e.Problems[0].Message, "a proxy section is already set in "+paths[0]+":1") {
		t.Errorf("two proxy sections: %v", err)
	}
}

func TestParseKeySpec(t *testing.T) {
	for in, want := range map[string]string{
		"ip": "ip", "global": "global", "header:x-api-key": "header:X-Api-Key",
		"header:X-User+ip": "header:X-User+ip", " ip + header: X-A ": "ip+header:X-A",
	} {
		k, err := ParseKeySpec(in)
		if err != nil || k.String() != want {
			t.Errorf("ParseKeySpec(%q) = %q, %v; want %q", in, k, err, want)
		}
	}
	for _, in := range []string{"", " ", "IP", "header", "header:a b", "ip+", "global+global", "cookie:x"} {
		if k, err := ParseKeySpec(in); err == nil {
			t.Errorf("ParseKeySpec(%q) = %q, want an error", in, k)
		}
	}
}

func TestExampleProxyLoads(t *testing.T) {
	cfg, err := Load("../../examples/proxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Proxy == nil || len(cfg.Proxy.Routes) == 0 {
		t.Fatalf("examples/proxy.yaml: no routes: %+v", cfg.Proxy)
	}
}

// TestChargeHeader: a route limit's charge_header is read in canonical
// form, must be a header name, and cannot charge a concurrency limit.
func TestChargeHeader(t *testing.T) {
	const policies = `policies:
  - {name: tokens, algorithm: token_bucket, limit: 1000, period: 1m}
  - {name: inflight, algorithm: concurrency, limit: 10, period: 1m}
proxy:
  routes:
`
	cfg, err := Parse("t.yaml", []byte(policies+"    - limits: [{policy: tokens, key: ip, charge_header: x-tokens-used}, {policy: inflight, key: ip}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Proxy.Routes[0].Limits; l[0].ChargeHeader != "X-Tokens-Used" || l[1].ChargeHeader != "" {
		t.Errorf("charge headers %q, %q; want X-Tokens-Used and none", l[0].ChargeHeader, l[1].ChargeHeader)
	}
	// cost: 0 checks with a peek; a concurrency limit may say cost: 1.
	cfg, err = Parse("t.yaml", []byte(policies+"    - limits: [{policy: tokens, key: ip, charge_header: X-Used, cost: 0}, {policy: inflight, key: ip, cost: 1}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Proxy.Routes[0].Limits; l[0].Cost != 0 || l[1].Cost != 1 {
		t.Errorf("costs %d, %d; want 0 and 1", l[0].Cost, l[1].Cost)
	}
	for route, want := range map[string]string{
		"    - limits: [{policy: inflight, key: ip, charge_header: X-Used}]\n": `proxy.routes[0].limits[0].charge_header: policy "inflight" is a concurrency limit`,
		"    - limits: [{policy: tokens, key: ip, charge_header: 'x used'}]\n": `proxy.routes[0].limits[0].charge_header: not a valid header name`,
		"    - limits: [{policy: tokens, key: ip, charge_header: [a]}]\n":      `proxy.routes[0].limits[0].charge_header`,
		"    - limits: [{policy: tokens, key: ip, cost: -1}]\n":                `proxy.routes[0].limits[0].cost: must be 0 (a peek) or more, got -1`,
		"    - limits: [{policy: tokens, key: ip, cost: 1.5}]\n":               `proxy.routes[0].limits[0].cost: must be a whole number`,
		"    - limits: [{policy: inflight, key: ip, cost: 0}]\n":               `proxy.routes[0].limits[0].cost: policy "inflight" is a concurrency limit: a request holds one slot`,
	} {
		if _, err := Parse("t.yaml", []byte(policies+route)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", route, err, want)
		}
	}
}
