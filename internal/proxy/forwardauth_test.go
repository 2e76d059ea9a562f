package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// authConfig limits POSTs to /api/ per client address and leaves the rest
// unlimited; the gateway, on loopback, is trusted.
var authConfig = y(
	"policies:",
	"  - {name: writes, algorithm: fixed_window, limit: 2, period: 1m}",
	"proxy:",
	"  trusted_proxies: [127.0.0.1]",
	"  routes:",
	"    - match: {path_prefix: /api/, methods: [POST]}",
	"      limits: [{policy: writes, key: ip}]",
)

// authServer is a forward-auth endpoint on a loopback port, with a fake clock.
type authServer struct {
	*httptest.Server
	clock *storetest.Clock
}

func startForwardAuth(t *testing.T, src string) *authServer {
	t.Helper()
	cfg, err := config.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Epoch)
	h, err := ForwardAuth(serviceOf(cfg, memory.New(memory.WithClock(clock))))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &authServer{srv, clock}
}

// ask sends a forward-auth request to path with the header fields kv
// ("Name", "value", ...) and returns the answer with its body read.
func (a *authServer) ask(t *testing.T, path string, kv ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Add(kv[i], kv[i+1])
	}
	resp, err := a.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// traefik is what Traefik's ForwardAuth middleware sends (trustForwardHeader
// false): the original method, scheme, host and request URI, and the client
// address it saw, plus the request's own header fields.
func traefik(method, uri, client string, extra ...string) []string {
	return append([]string{
		"X-Forwarded-Method", method,
		"X-Forwarded-Proto", "https",
		"X-Forwarded-Host", "api.example.com",
		"X-Forwarded-Uri", uri,
		"X-Forwarded-For", client,
	}, extra...)
}

func TestForwardAuthTraefikContract(t *testing.T) {
	a := startForwardAuth(t, authConfig)
	alice := traefik("POST", "/api/items?draft=1", "203.0.113.7", "Authorization", "Bearer x")
	for i := range 2 {
		resp, body := a.ask(t, ForwardAuthPath, alice...)
		if resp.StatusCode != http.StatusOK || body != "" {
			t.Fatalf("request %d: %d %q, want 200 and no body", i, resp.StatusCode, body)
		}
		if v := resp.Header.Get("RateLimit-Policy"); v != `"writes";q=2;w=60` {
			t.Errorf("RateLimit-Policy = %q", v)
		}
		if v, want := resp.Header.Get("RateLimit"), fmt.Sprintf(`"writes";r=%d;t=60`, 1-i); v != want {
			t.Errorf("request %d: RateLimit = %q, want %q", i, v, want)
		}
	}
	resp, body := a.ask(t, ForwardAuthPath, alice...)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third: %d, want 429", resp.StatusCode)
	}
	if v := resp.Header.Get("Retry-After"); v != "60" {
		t.Errorf("Retry-After = %q, want 60", v)
	}
	if v := resp.Header.Get("RateLimit"); v != `"writes";r=0;t=60` {
		t.Errorf("RateLimit = %q", v)
	}
	var p struct {
		Type     string
		Status   int
		Violated []struct{ Name string } `json:"violated_policies"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("body %q (%s): %v", body, resp.Header.Get("Content-Type"), err)
	}
	if p.Status != 429 || len(p.Violated) != 1 || p.Violated[0].Name != "writes" || !strings.HasSuffix(p.Type, "rate-limited") {
		t.Errorf("problem %+v", p)
	}

	// Another client, as the trusted gateway reports it, has its own count.
	if resp, _ := a.ask(t, ForwardAuthPath, traefik("POST", "/api/items", "198.51.100.1")...); resp.StatusCode != http.StatusOK {
		t.Errorf("another client: %d, want 200", resp.StatusCode)
	}
	// Routes match the original method and path, not the auth request's.
	for _, orig := range [][2]string{{"GET", "/api/items"}, {"POST", "/other"}} {
		resp, _ := a.ask(t, ForwardAuthPath, traefik(orig[0], orig[1], "203.0.113.7")...)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit") != "" {
			t.Errorf("%s %s: %d, RateLimit %q; want 200 unlimited", orig[0], orig[1], resp.StatusCode, resp.Header.Get("RateLimit"))
		}
	}
	// Dot segments do not dodge a route, as in the proxy.
	if resp, _ := a.ask(t, ForwardAuthPath, traefik("POST", "/other/../api/items", "203.0.113.7")...); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("/other/../api/items: %d, want 429", resp.StatusCode)
	}
	a.clock.Advance(time.Minute)
	if resp, _ := a.ask(t, ForwardAuthPath, alice...); resp.StatusCode != http.StatusOK {
		t.Errorf("next window: %d, want 200", resp.StatusCode)
	}
}

func TestForwardAuthUntrustedGateway(t *testing.T) {
	// Without trusted_proxies, X-Forwarded-For is the client's word: every
	// request counts as the gateway's, whatever address it names.
	a := startForwardAuth(t, strings.Replace(authConfig, "  trusted_proxies: [127.0.0.1]\n", "", 1))
	var got []int
	for _, client := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.3"} {
		resp, _ := a.ask(t, ForwardAuthPath, traefik("POST", "/api/x", client)...)
		got = append(got, resp.StatusCode)
	}
	if got[0] != 200 || got[1] != 200 || got[2] != 429 {
		t.Errorf("statuses %v, want [200 200 429]", got)
	}
}

func TestForwardAuthNginxMode(t *testing.T) {
	a := startForwardAuth(t, authConfig)
	req := traefik("POST", "/api/items", "203.0.113.7")
	for range 2 {
		if resp, _ := a.ask(t, ForwardAuthNginxPath, req...); resp.StatusCode != http.StatusOK {
			t.Fatalf("allowed: %d", resp.StatusCode)
		}
	}
	resp, _ := a.ask(t, ForwardAuthNginxPath, req...)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("denied: %d, want 403", resp.StatusCode)
	}
	if resp.Header.Get("Retry-After") != "60" || resp.Header.Get("RateLimit") != `"writes";r=0;t=60` ||
		resp.Header.Get("RateLimit-Policy") == "" {
		t.Errorf("403 without the fields nginx passes on: %v", resp.Header)
	}
	// Both paths count in the same buckets.
	if resp, _ := a.ask(t, ForwardAuthPath, req...); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the other path: %d, want 429", resp.StatusCode)
	}
}

func TestForwardAuthBadRequests(t *testing.T) {
	a := startForwardAuth(t, authConfig)
	for _, tc := range []struct {
		kv   []string
		want string
	}{
		{[]string{"X-Forwarded-Uri", "/api/x"}, "no X-Forwarded-Method"},
		{[]string{"X-Forwarded-Method", "POST"}, "no X-Forwarded-Uri"},
		{[]string{"X-Forwarded-Method", "PO ST", "X-Forwarded-Uri", "/api/x"}, "not an HTTP method"},
		{[]string{"X-Forwarded-Method", "POST", "X-Forwarded-Uri", "http://evil/api/x"}, "want a path"},
		{[]string{"X-Forwarded-Method", "POST", "X-Forwarded-Uri", "*"}, "want a path"},
	} {
		resp, body := a.ask(t, ForwardAuthPath, tc.kv...)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, tc.want) ||
			resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%q: %d %q, want 400 saying %q", tc.kv, resp.StatusCode, body, tc.want)
		}
	}
	if resp, _ := a.ask(t, "/v1/forward-auth/other", traefik("POST", "/api/x", "203.0.113.7")...); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown path: %d, want 404", resp.StatusCode)
	}
}

func TestForwardAuthNeedsProxySection(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte("policies:\n  - {name: p, algorithm: gcra, limit: 1, period: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ForwardAuth(serviceOf(cfg, memory.New())); err == nil || !strings.Contains(err.Error(), "no proxy: section") {
		t.Errorf("err = %v", err)
	}
}

// FuzzForwardedRequest feeds the headers a gateway sends: a request is
// either refused with an error or rebuilt with a valid method and a path
// that routes the same way the URI reads.
func FuzzForwardedRequest(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "/api/items?x=1", "api.example.com"},
		{"POST", "/a/../b//c/", ""},
		{"", "/", ""},
		{"GET", "", "h"},
		{"GET", "http://h/x", ""},
		{"GET", "*", ""},
		{"G\x00T", "/%zz", ""},
		{"DELETE", "/%2e%2e/admin", "h:1"},
		{"GET", "//x?y#z", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, method, uri, host string) {
		r := httptest.NewRequest(http.MethodGet, "http://sluice/v1/forward-auth", nil)
		r.Header.Set(HeaderForwardedMethod, method)
		r.Header.Set(HeaderForwardedURI, uri)
		r.Header.Set(HeaderForwardedHost, host)
		orig, err := ForwardedRequest(r)
		if err != nil {
			if orig != nil {
				t.Fatal("request and error")
			}
			return
		}
		if orig.Method != r.Header.Get(HeaderForwardedMethod) || orig.Method == "" {
			t.Fatalf("method %q from %q", orig.Method, method)
		}
		if orig.URL == nil || !strings.HasPrefix(orig.URL.Path, "/") && orig.URL.Path != "" {
			t.Fatalf("uri %q gave URL %#v", uri, orig.URL)
		}
		if c := matchPath(orig.URL.Path); !strings.HasPrefix(c, "/") || strings.Contains(c, "/../") {
			t.Fatalf("uri %q routes as %q", uri, c)
		}
		if orig.Header.Get(HeaderForwardedHost) != "" && orig.Host != orig.Header.Get(HeaderForwardedHost) {
			t.Fatalf("host %q, want %q", orig.Host, host)
		}
		if r.Method != http.MethodGet || r.URL.Path != "/v1/forward-auth" {
			t.Fatal("the auth request was changed")
		}
	})
}
