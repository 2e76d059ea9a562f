package proxy

// End-to-end tests of the forward-auth endpoint behind real Caddy and real
// nginx, run as child processes on loopback ports with the configurations
// of docs/gateways.md, so that the documented snippets are the tested ones.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// The addresses the snippets in docs/gateways.md use, replaced by free ports.
const (
	docAuthAddr     = "127.0.0.1:8080"
	docUpstreamAddr = "127.0.0.1:9000"
)

// docBlock returns the first fenced code block of docs/gateways.md in lang.
func docBlock(t *testing.T, lang string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "gateways.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?ms)^```" + regexp.QuoteMeta(lang) + "\n(.*?)^```").FindSubmatch(b)
	if m == nil {
		t.Fatalf("docs/gateways.md has no ```%s block", lang)
	}
	return string(m[1])
}

// needBinary finds a gateway binary. Under CI it must be there (make test
// installs it with scripts/ensure-gateways.sh); elsewhere the test skips.
func needBinary(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	// Debian installs nginx in /usr/sbin, which is on root's PATH only.
	if p, err := exec.LookPath(filepath.Join("/usr/sbin", name)); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not installed; run scripts/ensure-gateways.sh", name)
	}
	t.Skipf("%s is not installed (scripts/ensure-gateways.sh installs it)", name)
	return ""
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// countingUpstream is the service behind the gateway: it counts the
// requests that reach it by method, path and API key.
type countingUpstream struct {
	*httptest.Server
	mu        sync.Mutex
	seen      map[string]int
	rateLimit []string // the RateLimit field of each /api/ request, as the gateway passed it
}

func newCountingUpstream(t *testing.T) *countingUpstream {
	u := &countingUpstream{seen: map[string]int{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen[r.Method+" "+r.URL.Path+" "+r.Header.Get("X-Api-Key")]++
		if strings.HasPrefix(r.URL.Path, "/api/") {
			u.rateLimit = append(u.rateLimit, r.Header.Get("RateLimit"))
		}
		u.mu.Unlock()
		io.WriteString(w, "from upstream")
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *countingUpstream) count(key string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[key]
}

// gatewayFixture is the documented setup on free ports: the upstream, the
// forward-auth endpoint (on a store whose clock stands still, so no window
// ends during the test) and the addresses to write into a gateway's
// configuration.
type gatewayFixture struct {
	up       *countingUpstream
	authAddr string
	port     int // the gateway's
	dir      string
}

func newGatewayFixture(t *testing.T) *gatewayFixture {
	cfg, err := config.Parse("gateways.md", []byte(docBlock(t, "yaml")))
	if err != nil {
		t.Fatal(err)
	}
	h, err := ForwardAuth(cfg, memory.New(memory.WithClock(storetest.NewClock(storetest.Epoch))))
	if err != nil {
		t.Fatal(err)
	}
	auth := httptest.NewServer(h)
	t.Cleanup(auth.Close)
	return &gatewayFixture{
		up:       newCountingUpstream(t),
		authAddr: strings.TrimPrefix(auth.URL, "http://"),
		port:     freePort(t),
		dir:      t.TempDir(),
	}
}

// addresses points a documented snippet at the fixture's servers.
func (f *gatewayFixture) addresses(snippet string) string {
	return strings.NewReplacer(docAuthAddr, f.authAddr, docUpstreamAddr, strings.TrimPrefix(f.up.URL, "http://")).Replace(snippet)
}

// run starts a gateway process, stops it when the test ends, and waits
// until it answers on its port.
func (f *gatewayFixture) run(t *testing.T, name string, env []string, args ...string) string {
	t.Helper()
	logPath := filepath.Join(f.dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(needBinary(t, name), args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = f.dir, logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logFile.Close(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", f.port)
	deadline := time.Now().Add(60 * time.Second) // a loaded machine starts slowly
	for {
		// /public/ matches no route: unlimited, so waiting costs no quota.
		resp, err := http.Get(base + "/public/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			t.Fatalf("%s exited: %s", name, log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("%s does not answer on %s (last: %v): %s", name, base, err, log)
		}
	}
}

func TestCaddyForwardAuth(t *testing.T) {
	f := newGatewayFixture(t)
	snippet := f.addresses(docBlock(t, "caddyfile"))
	// Loopback only, no admin endpoint, no certificates: test-only settings
	// around the documented site.
	site := strings.Replace(snippet, ":8000 {", fmt.Sprintf("http://127.0.0.1:%d {\n\tbind 127.0.0.1", f.port), 1)
	if site == snippet {
		t.Fatal("the Caddyfile snippet no longer starts with :8000 {")
	}
	conf := "{\n\tadmin off\n\tauto_https off\n}\n" + site
	path := filepath.Join(f.dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + f.dir, "XDG_CONFIG_HOME=" + f.dir, "XDG_DATA_HOME=" + f.dir}
	base := f.run(t, "caddy", env, "run", "--config", path, "--adapter", "caddyfile")
	checkGateway(t, base, f.up)
	// copy_headers hands an admitted request's RateLimit field to the upstream.
	f.up.mu.Lock()
	defer f.up.mu.Unlock()
	if len(f.up.rateLimit) == 0 || !strings.HasPrefix(f.up.rateLimit[0], `"api_reads";r=4;t=`) {
		t.Errorf("RateLimit fields at the upstream: %q", f.up.rateLimit)
	}
}

func TestNginxForwardAuth(t *testing.T) {
	f := newGatewayFixture(t)
	snippet := f.addresses(docBlock(t, "nginx"))
	server := strings.Replace(snippet, "listen 8000;", fmt.Sprintf("listen 127.0.0.1:%d;", f.port), 1)
	if server == snippet {
		t.Fatal("the nginx snippet no longer listens on 8000")
	}
	// The documented server block inside a configuration that keeps every
	// file in the temporary directory.
	d := f.dir
	conf := fmt.Sprintf(`master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 256; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[2]s}
`, d, server)
	path := filepath.Join(d, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	base := f.run(t, "nginx", nil, "-p", d+"/", "-c", path, "-e", d+"/error.log", "-g", "daemon off;")
	resp := checkGateway(t, base, f.up)
	// nginx adds the fields to admitted responses as well.
	if v := resp.Header.Get("RateLimit"); !strings.HasPrefix(v, `"api_reads";r=`) {
		t.Errorf("admitted response: RateLimit = %q", v)
	}
}

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
