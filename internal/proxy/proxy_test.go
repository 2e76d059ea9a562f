package proxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memory"
)

// perIP is a configuration with one catch-all route: 2 requests a minute per
// client address.
var perIP = y(
	"policies:",
	"  - {name: per_ip, algorithm: fixed_window, limit: 2, period: 1m}",
	"proxy:",
	"  routes:",
	"    - limits: [{policy: per_ip, key: ip}]",
)

func TestForwardsUnchanged(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, perIP, up.URL)
	sent := http.Header{
		"Content-Type":  {"application/json"},
		"X-Custom":      {"one", "two"},
		"Authorization": {"Bearer t0ken"},
		"Cookie":        {"session=abc"},
		// Hop-by-hop: a field named in Connection is for this hop only.
		"Connection": {"X-Hop"},
		"X-Hop":      {"secret"},
	}
	resp, body := p.do(t, http.MethodPost, "/api/items/%C3%A9?b=2&a=1&a=0", sent, `{"n":1}`)

	if up.count() != 1 {
		t.Fatalf("upstream got %d requests, want 1", up.count())
	}
	got := up.last()
	if got.Method != http.MethodPost || got.Path != "/api/items/é" || got.RawQuery != "b=2&a=1&a=0" || string(got.Body) != `{"n":1}` {
		t.Errorf("upstream got %s %s?%s %q", got.Method, got.Path, got.RawQuery, got.Body)
	}
	for name, want := range sent {
		if name == "Connection" || name == "X-Hop" {
			continue
		}
		if v := got.Header[name]; !reflect.DeepEqual(v, want) {
			t.Errorf("upstream header %s = %q, want %q", name, v, want)
		}
	}
	if v := got.Header.Get("X-Hop"); v != "" {
		t.Errorf("hop-by-hop X-Hop forwarded: %q", v)
	}
	if v := got.Header.Get("X-Forwarded-For"); v != "127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q, want 127.0.0.1", v)
	}
	proxyHost := strings.TrimPrefix(p.URL, "http://")
	if v := got.Header.Get("X-Forwarded-Host"); v != proxyHost {
		t.Errorf("X-Forwarded-Host = %q, want %q", v, proxyHost)
	}
	if upHost := strings.TrimPrefix(up.URL, "http://"); got.Host != upHost {
		t.Errorf("upstream saw Host %q, want its own %q", got.Host, upHost)
	}

	if resp.StatusCode != http.StatusCreated || body != "hello from upstream /api/items/é" {
		t.Errorf("response %d %q", resp.StatusCode, body)
	}
	if v := resp.Header.Get("X-Upstream"); v != "yes" {
		t.Errorf("X-Upstream = %q", v)
	}
	if v := resp.Header.Values("Set-Cookie"); !reflect.DeepEqual(v, []string{"a=1", "b=2"}) {
		t.Errorf("Set-Cookie = %q", v)
	}
	if v := resp.Header.Get("RateLimit-Policy"); v != `"per_ip";q=2;w=60` {
		t.Errorf("RateLimit-Policy = %q", v)
	}
	if v := resp.Header.Get("RateLimit"); !strings.HasPrefix(v, `"per_ip";r=1;t=`) {
		t.Errorf("RateLimit = %q", v)
	}
}

func TestDeniedNotForwarded(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, perIP, up.URL)
	if got := p.statuses(t, 2, "/x"); !reflect.DeepEqual(got, []int{201, 201}) {
		t.Fatalf("first two: %v", got)
	}
	resp, body := p.do(t, http.MethodPost, "/x", nil, "must not arrive")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third: %d, want 429", resp.StatusCode)
	}
	if v := resp.Header.Get("Retry-After"); v != "60" {
		t.Errorf("Retry-After = %q, want 60 (the rest of the window)", v)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" || !strings.Contains(body, "per_ip") {
		t.Errorf("denial %s %q", ct, body)
	}
	if n := up.count(); n != 2 {
		t.Errorf("upstream got %d requests, want 2: a denied request must not be forwarded", n)
	}
	p.clock.Advance(time.Minute)
	if got := p.get(t, "/x").StatusCode; got != 201 {
		t.Errorf("after the window: %d, want 201", got)
	}
}

func TestRouteMatching(t *testing.T) {
	up := newUpstream(t)
	var pols []string
	for _, n := range []string{"admin", "api", "api_special", "all"} {
		pols = append(pols, "  - {name: "+n+", algorithm: fixed_window, limit: 100, period: 1m}")
	}
	src := y(append(append([]string{"policies:"}, pols...),
		"proxy:",
		"  routes:",
		"    - match: {path_prefix: /admin/, methods: [POST, DELETE], headers: {x-tenant: acme}}",
		"      limits: [{policy: admin, key: global}]",
		"    - match: {path_prefix: /api/}",
		"      limits: [{policy: api, key: global}]",
		"    - match: {path_prefix: /api/special/}", // shadowed by /api/: first match wins
		"      limits: [{policy: api_special, key: global}]",
		"    - match: {path_prefix: /free/}", // no limits: unlimited
		"    - match: {methods: [PUT]}",
		"      limits: [{policy: all, key: global}]",
	)...)
	p := startProxy(t, src, up.URL)
	for _, tc := range []struct {
		method, path string
		header       http.Header
		want         string // the policy applied; "" for none
	}{
		{"POST", "/admin/users", http.Header{"X-Tenant": {"acme"}}, "admin"},
		{"DELETE", "/admin/users", http.Header{"X-Tenant": {"other", "acme"}}, "admin"},
		{"GET", "/admin/users", http.Header{"X-Tenant": {"acme"}}, ""},  // method
		{"POST", "/admin/users", http.Header{"X-Tenant": {"evil"}}, ""}, // header value
		{"POST", "/admin/users", nil, ""},                               // header absent
		{"POST", "/admin", http.Header{"X-Tenant": {"acme"}}, ""},       // prefix /admin/ needs the slash
		{"GET", "/api/v1", nil, "api"},                                  // prefix
		{"GET", "/api/special/x", nil, "api"},                           // first match wins
		{"GET", "/free/../api/x", nil, "api"},                           // matched after cleaning
		{"GET", "/free//x", nil, ""},                                    // a route without limits
		{"PUT", "/free/x", nil, ""},                                     // ...even if a later one would match
		{"PUT", "/elsewhere", nil, "all"},                               // method only
		{"GET", "/elsewhere", nil, ""},                                  // no route at all
	} {
		resp, _ := p.do(t, tc.method, tc.path, tc.header, "")
		got := resp.Header.Get("RateLimit-Policy")
		if got != "" {
			got = strings.Trim(strings.Split(got, ";")[0], `"`)
		}
		if got != tc.want || resp.StatusCode != 201 {
			t.Errorf("%s %s %v: policy %q status %d, want policy %q, 201", tc.method, tc.path, tc.header, got, resp.StatusCode, tc.want)
		}
	}
}

func TestUnmatchedPassesUnlimited(t *testing.T) {
	up := newUpstream(t)
	src := y(
		"policies:",
		"  - {name: api, algorithm: fixed_window, limit: 1, period: 1m}",
		"proxy:",
		"  routes:",
		"    - {match: {path_prefix: /api/}, limits: [{policy: api, key: ip}]}",
	)
	p := startProxy(t, src, up.URL)
	for i, s := range p.statuses(t, 5, "/public") {
		if s != 201 {
			t.Errorf("request %d to an unmatched path: %d", i, s)
		}
	}
	if got := p.statuses(t, 2, "/api/x"); !reflect.DeepEqual(got, []int{201, 429}) {
		t.Errorf("/api/: %v, want [201 429]", got)
	}
}

func TestKeys(t *testing.T) {
	up := newUpstream(t)
	src := y(
		"policies:",
		"  - {name: per_key, algorithm: fixed_window, limit: 1, period: 1m}",
		"  - {name: global, algorithm: fixed_window, limit: 3, period: 1m}",
		"  - {name: combo, algorithm: fixed_window, limit: 1, period: 1m}",
		"proxy:",
		"  routes:",
		"    - match: {path_prefix: /keyed/}",
		`      limits: [{policy: per_key, key: "header:X-API-Key", fallback: ip}]`,
		"    - match: {path_prefix: /global/}",
		"      limits: [{policy: global, key: global}]",
		"    - match: {path_prefix: /combo/}",
		`      limits: [{policy: combo, key: "ip+header:X-User"}]`,
	)
	p := startProxy(t, src, up.URL)
	check := func(what string, got, want int) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %d, want %d", what, got, want)
		}
	}
	check("key a", p.get(t, "/keyed/", "X-API-Key", "a").StatusCode, 201)
	check("key a again", p.get(t, "/keyed/", "X-API-Key", "a").StatusCode, 429)
	check("key b", p.get(t, "/keyed/", "X-API-Key", "b").StatusCode, 201)
	check("no key: falls back to the address", p.get(t, "/keyed/").StatusCode, 201)
	check("no key again", p.get(t, "/keyed/").StatusCode, 429)
	// The header's value "127.0.0.1" is not the fallback bucket of the address.
	check("key equal to the address", p.get(t, "/keyed/", "X-API-Key", "127.0.0.1").StatusCode, 201)

	for _, key := range []string{"a", "b", "c"} {
		check("global "+key, p.get(t, "/global/", "X-API-Key", key).StatusCode, 201)
	}
	check("global, 4th client", p.get(t, "/global/", "X-API-Key", "d").StatusCode, 429)

	check("combo u1", p.get(t, "/combo/", "X-User", "u1").StatusCode, 201)
	check("combo u1 again", p.get(t, "/combo/", "X-User", "u1").StatusCode, 429)
	check("combo u2", p.get(t, "/combo/", "X-User", "u2").StatusCode, 201)
	// Without X-User the combined key is incomplete: the limit does not apply.
	check("combo without user", p.get(t, "/combo/").StatusCode, 201)
	check("combo without user again", p.get(t, "/combo/").StatusCode, 201)
}

func TestForwardedFor(t *testing.T) {
	up := newUpstream(t)
	route := []string{
		"policies:",
		"  - {name: per_ip, algorithm: fixed_window, limit: 1, period: 1m}",
		"proxy:",
	}
	routes := []string{"  routes:", "    - limits: [{policy: per_ip, key: ip}]"}

	t.Run("untrusted peer", func(t *testing.T) {
		p := startProxy(t, y(append(route, routes...)...), up.URL)
		if s := p.get(t, "/", "X-Forwarded-For", "192.0.2.1").StatusCode; s != 201 {
			t.Fatalf("first: %d", s)
		}
		// A spoofed address does not make a new client: the peer is the key.
		if s := p.get(t, "/", "X-Forwarded-For", "192.0.2.2").StatusCode; s != 429 {
			t.Errorf("spoofed X-Forwarded-For: %d, want 429", s)
		}
	})
	t.Run("trusted peer", func(t *testing.T) {
		p := startProxy(t, y(append(append(route, "  trusted_proxies: [127.0.0.1, '::1']"), routes...)...), up.URL)
		got := []int{
			p.get(t, "/", "X-Forwarded-For", "192.0.2.1").StatusCode,
			p.get(t, "/", "X-Forwarded-For", "192.0.2.2").StatusCode,
			p.get(t, "/", "X-Forwarded-For", "192.0.2.1").StatusCode,
		}
		if !reflect.DeepEqual(got, []int{201, 201, 429}) {
			t.Errorf("statuses %v, want [201 201 429]: each forwarded client counted apart", got)
		}
	})
}

func TestShadowPolicyNotEnforced(t *testing.T) {
	up := newUpstream(t)
	src := y(
		"policies:",
		"  - {name: trial, algorithm: fixed_window, limit: 1, period: 1m, shadow: true}",
		"proxy:",
		"  routes:",
		"    - limits: [{policy: trial, key: ip}]",
	)
	p := startProxy(t, src, up.URL)
	if got := p.statuses(t, 3, "/"); !reflect.DeepEqual(got, []int{201, 201, 201}) {
		t.Errorf("shadow policy: %v, want every request through", got)
	}
	if up.count() != 3 {
		t.Errorf("upstream got %d", up.count())
	}
}

func TestUpstreamDown(t *testing.T) {
	up := newUpstream(t)
	dead := up.URL
	up.Close() // nothing listens there any more
	p := startProxy(t, perIP, dead)
	resp, body := p.do(t, http.MethodGet, "/x", nil, "")
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q", ct)
	}
	var pr struct {
		Type   string
		Status int
		Detail string
	}
	if err := json.Unmarshal([]byte(body), &pr); err != nil || pr.Status != 502 || pr.Type != ProblemUpstream {
		t.Errorf("body %q: %+v, %v", body, pr, err)
	}
	if strings.Contains(body, strings.TrimPrefix(dead, "http://")) {
		t.Errorf("body leaks the upstream address: %q", body)
	}
}

func TestNewRejects(t *testing.T) {
	withProxy, err := config.Parse("t.yaml", []byte(perIP))
	if err != nil {
		t.Fatal(err)
	}
	noProxy, err := config.Parse("t.yaml", []byte(y("policies:", "  - {name: a, algorithm: gcra, limit: 1, period: 1s}")))
	if err != nil {
		t.Fatal(err)
	}
	good, _ := url.Parse("http://127.0.0.1:9")
	for _, tc := range []struct {
		name     string
		cfg      *config.Config
		upstream string
		want     string
	}{
		{"no proxy section", noProxy, "http://127.0.0.1:9", "no proxy: section"},
		{"ftp upstream", withProxy, "ftp://example.com", "want an http:// or https:// URL"},
		{"no host", withProxy, "http:///path", "no host"},
	} {
		u, _ := url.Parse(tc.upstream)
		if _, err := New(serviceOf(tc.cfg, memory.New()), u); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := New(serviceOf(withProxy, memory.New()), good); err != nil {
		t.Errorf("valid: %v", err)
	}
}

// TestExample runs examples/proxy.yaml, which the docs tell newcomers to try.
func TestExample(t *testing.T) {
	up := newUpstream(t)
	cfg, err := config.Load("../../examples/proxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	h, err := New(serviceOf(cfg, memory.New()), u)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	p := &testProxy{Server: srv}
	resp := p.get(t, "/api/items", "X-API-Key", "alice")
	if got := resp.Header.Get("RateLimit-Policy"); resp.StatusCode != 201 ||
		!strings.Contains(got, `"proxy_api_per_key"`) || !strings.Contains(got, `"proxy_api_total"`) {
		t.Errorf("/api/items: %d, RateLimit-Policy %q", resp.StatusCode, got)
	}
	if got := p.get(t, "/healthz", "X-Monitor", "yes").Header.Get("RateLimit-Policy"); got != "" {
		t.Errorf("/healthz from the monitor: RateLimit-Policy %q, want none", got)
	}
	if got := p.get(t, "/").Header.Get("RateLimit-Policy"); !strings.Contains(got, `"proxy_per_ip"`) {
		t.Errorf("/: RateLimit-Policy %q", got)
	}
}
