package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// received is what the test upstream saw of one request.
type received struct {
	Method, Path, RawQuery, Host string
	Header                       http.Header
	Body                         []byte
}

// upstream is a test upstream that records every request it gets.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []received
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, received{r.Method, r.URL.Path, r.URL.RawQuery, r.Host, r.Header.Clone(), body})
		u.mu.Unlock()
		w.Header().Set("X-Upstream", "yes")
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "hello from upstream "+r.URL.Path)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.reqs)
}

func (u *upstream) last() received {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.reqs[len(u.reqs)-1]
}

// y joins lines into a YAML document.
func y(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// testProxy is a proxy in front of an upstream, on a store with a fake clock.
type testProxy struct {
	*httptest.Server
	clock *storetest.Clock
}

// startProxy parses src, starts the proxy on a loopback port in front of
// upstreamURL and returns it; the clock starts at storetest.Epoch and moves
// only when the test says.
func startProxy(t *testing.T, src, upstreamURL string, opts ...Option) *testProxy {
	t.Helper()
	cfg, err := config.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Epoch)
	u, err := url.Parse(upstreamURL)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(serviceOf(cfg, memory.New(memory.WithClock(clock))), u, opts...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testProxy{srv, clock}
}

// do sends a request through the proxy and returns the response with its
// body read.
func (p *testProxy) do(t *testing.T, method, path string, header http.Header, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, p.URL+path, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := p.Client().Do(req)
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

// get sends a GET with the given header fields ("Name", "value", ...).
func (p *testProxy) get(t *testing.T, path string, kv ...string) *http.Response {
	t.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	resp, _ := p.do(t, http.MethodGet, path, h, "")
	return resp
}

// statuses sends n GETs and returns their statuses.
func (p *testProxy) statuses(t *testing.T, n int, path string, kv ...string) []int {
	t.Helper()
	var out []int
	for range n {
		out = append(out, p.get(t, path, kv...).StatusCode)
	}
	return out
}

// serviceOf is a Service deciding on store with cfg in force, as the proxy's
// front ends are given.
func serviceOf(cfg *config.Config, store sluice.Store) *service.Service {
	return service.New(storestack.Of(store), cfg)
}
