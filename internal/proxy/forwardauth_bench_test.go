package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memory"
)

// benchAuthConfig admits everything it sees in a benchmark: the cost of a
// decision, not of a denial, is what a gateway adds to every request.
var benchAuthConfig = y(
	"policies:",
	"  - {name: per_client, algorithm: gcra, limit: 1000000000, period: 1s}",
	"proxy:",
	"  trusted_proxies: [127.0.0.1]",
	"  routes:",
	"    - match: {path_prefix: /api/}",
	"      limits: [{policy: per_client, key: ip}]",
)

func benchForwardAuth(b *testing.B) http.Handler {
	cfg, err := config.Parse("bench.yaml", []byte(benchAuthConfig))
	if err != nil {
		b.Fatal(err)
	}
	h, err := ForwardAuth(serviceOf(cfg, memory.New()))
	if err != nil {
		b.Fatal(err)
	}
	return h
}

func setTraefikHeaders(h http.Header) {
	kv := traefik("POST", "/api/items?page=2", "203.0.113.7", "X-Api-Key", "alice")
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
}

// BenchmarkForwardAuth is one decision through the handler: rebuilding the
// request, routing, the limit on the memory store and the answer's fields.
func BenchmarkForwardAuth(b *testing.B) {
	h := benchForwardAuth(b)
	req := httptest.NewRequest(http.MethodGet, ForwardAuthPath, nil)
	req.RemoteAddr = "127.0.0.1:40000"
	setTraefikHeaders(req.Header)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
	}
}

// BenchmarkForwardAuthHTTP adds what a gateway pays on loopback: one HTTP
// round trip on a kept-alive connection.
func BenchmarkForwardAuthHTTP(b *testing.B) {
	srv := httptest.NewServer(benchForwardAuth(b))
	defer srv.Close()
	client := srv.Client()
	req, err := http.NewRequest(http.MethodGet, srv.URL+ForwardAuthPath, nil)
	if err != nil {
		b.Fatal(err)
	}
	setTraefikHeaders(req.Header)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
