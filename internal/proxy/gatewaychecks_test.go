package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
)

// checkGateway sends requests through a gateway configured as documented and
// checks that the limits hold, that no denied request reaches the upstream,
// and that the client gets 429 with Retry-After and the RateLimit fields. It
// returns an admitted response.
func checkGateway(t *testing.T, base string, up *countingUpstream) *http.Response {
	t.Helper()
	send := func(method, path string, kv ...string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			req.Header.Set(kv[i], kv[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(body)
	}
	statuses := func(n int, method, path string, kv ...string) []int {
		var out []int
		for range n {
			resp, _ := send(method, path, kv...)
			out = append(out, resp.StatusCode)
		}
		return out
	}
	want := func(allowed, denied int) string {
		return fmt.Sprint(append(repeat(200, allowed), repeat(429, denied)...))
	}

	// api_reads: 5 a minute per API key.
	admitted, _ := send("GET", "/api/items", "X-API-Key", "alice")
	if got := fmt.Sprint(append([]int{admitted.StatusCode}, statuses(6, "GET", "/api/items", "X-API-Key", "alice")...)); got != want(5, 2) {
		t.Errorf("alice's reads: %s, want %s", got, want(5, 2))
	}
	resp, body := send("GET", "/api/items?page=2", "X-API-Key", "alice")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("denied: %d %q", resp.StatusCode, body)
	}
	if v := resp.Header.Get("Retry-After"); v != "60" {
		t.Errorf("Retry-After = %q, want 60", v)
	}
	if v := resp.Header.Get("RateLimit"); v != `"api_reads";r=0;t=60` {
		t.Errorf("RateLimit = %q", v)
	}
	if v := resp.Header.Get("RateLimit-Policy"); v != `"api_reads";q=5;w=60` {
		t.Errorf("RateLimit-Policy = %q", v)
	}
	var p struct {
		Type   string
		Status int
		Detail string
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("denial body %q (%s): %v", body, resp.Header.Get("Content-Type"), err)
	}
	if p.Type != httplimit.ProblemRateLimited || p.Status != 429 || !strings.Contains(p.Detail, "60 s") {
		t.Errorf("problem %+v", p)
	}
	// Every spelling of an /api/ path that an upstream may serve as one is
	// limited by the /api/ route: alice is out of reads under all of them.
	for _, path := range []string{"/API/items", "/api;x/items", "/Api;v=1/./items", "/api//items",
		"/%61pi/items", "/%2561pi/items", "/public/../api/items"} {
		if resp, body := send("GET", path, "X-API-Key", "alice"); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("GET %s for alice, out of reads: %d %q, want 429", path, resp.StatusCode, body)
		}
	}
	if n := up.total(" alice"); n != 5 {
		t.Errorf("alice's requests reached the upstream %d times, want 5", n)
	}
	// Another key has its own count; the method reaches the routes: api_writes
	// allows bob 2 POSTs, and his reads are apart.
	if got := fmt.Sprint(statuses(3, "POST", "/api/items", "X-API-Key", "bob")); got != want(2, 1) {
		t.Errorf("bob's writes: %s, want %s", got, want(2, 1))
	}
	if got := fmt.Sprint(statuses(1, "GET", "/api/items", "X-API-Key", "bob")); got != want(1, 0) {
		t.Errorf("bob's read: %s", got)
	}
	// Without a key the client address counts, as the gateway saw it: an
	// X-Forwarded-For of the client's own making buys no new count.
	var spoofed []int
	for i := range 6 {
		resp, _ := send("GET", "/api/items", "X-Forwarded-For", "203.0.113."+strconv.Itoa(i+1))
		spoofed = append(spoofed, resp.StatusCode)
	}
	if got := fmt.Sprint(spoofed); got != want(5, 1) {
		t.Errorf("keyless with forged X-Forwarded-For: %s, want %s", got, want(5, 1))
	}

	for key, n := range map[string]int{"GET /api/items alice": 5, "POST /api/items bob": 2, "GET /api/items bob": 1, "GET /api/items ": 5} {
		if got := up.count(key); got != n {
			t.Errorf("upstream saw %q %d times, want %d: a denied request must not reach it", key, got, n)
		}
	}
	return admitted
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// gatewayTimeout is how long the documented snippets let a gateway wait for
// Sluice's answer (response_header_timeout, proxy_read_timeout).
const gatewayTimeout = 3 * time.Second

// TestGatewaysStalledSluice: with Sluice stopped (its port accepts, nothing
// answers), Caddy and nginx configured as documented answer the client
// themselves with an error within their timeout, and pass nothing on.
// Without the snippets' timeouts Caddy waited indefinitely and nginx 60 s.
func TestGatewaysStalledSluice(t *testing.T) {
	for _, gw := range []struct {
		name  string
		start func(*testing.T, *gatewayFixture) string
	}{{"caddy", startCaddy}, {"nginx", startNginx}} {
		t.Run(gw.name, func(t *testing.T) {
			t.Parallel()
			f := newStalledFixture(t)
			base := gw.start(t, f)
			// The margin is for a loaded machine; a gateway without a timeout
			// holds the request far longer (or for ever).
			client := &http.Client{Timeout: gatewayTimeout + 10*time.Second}
			start := time.Now()
			resp, err := client.Get(base + "/api/items")
			if err != nil {
				t.Fatalf("no answer from %s after %v with Sluice stopped: %v", gw.name, time.Since(start).Round(time.Millisecond), err)
			}
			resp.Body.Close()
			took := time.Since(start)
			if resp.StatusCode < 500 {
				t.Errorf("%s with Sluice stopped answered %d, want a 5xx error", gw.name, resp.StatusCode)
			}
			if took < gatewayTimeout-100*time.Millisecond {
				t.Errorf("%s answered after %v, before its %v timeout: was Sluice asked?", gw.name, took, gatewayTimeout)
			}
			if n := f.up.total(""); n != 0 {
				t.Errorf("%d requests reached the upstream with Sluice stopped", n)
			}
			t.Logf("%s answered %d after %v", gw.name, resp.StatusCode, took.Round(time.Millisecond))
		})
	}
}
