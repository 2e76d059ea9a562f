package proxy

// End-to-end tests of the forward-auth endpoint behind real Caddy and real
// nginx, run as child processes on loopback ports with the configurations
// of docs/gateways.md, so that the documented snippets are the tested ones.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/testwait"
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
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "gateways.md"))
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

// total counts the requests whose "method path key" ends in suffix.
func (u *countingUpstream) total(suffix string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for k, c := range u.seen {
		if strings.HasSuffix(k, suffix) {
			n += c
		}
	}
	return n
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
	h, err := ForwardAuth(serviceOf(cfg, memory.New(memory.WithClock(storetest.NewClock(storetest.Epoch)))))
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

// newStalledFixture is the documented setup with a Sluice that has stopped
// (SIGSTOP, a partition): its port accepts connections, which the kernel
// completes, and nothing ever answers.
func newStalledFixture(t *testing.T) *gatewayFixture {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &gatewayFixture{
		up:       newCountingUpstream(t),
		authAddr: ln.Addr().String(), // never accepted
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
	// Listening is ready: an HTTP probe would spend quota, or wait for a
	// stalled Sluice.
	testwait.UntilSaw(t, fmt.Sprintf("%s listening on port %d", name, f.port), func() (bool, string) {
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			t.Fatalf("%s exited: %s", name, log)
		default:
		}
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", f.port))
		if err != nil {
			log, _ := os.ReadFile(logPath)
			return false, fmt.Sprintf("%v: %s", err, log)
		}
		conn.Close()
		return true, ""
	})
	return fmt.Sprintf("http://127.0.0.1:%d", f.port)
}

// startCaddy runs Caddy with the documented Caddyfile pointed at f.
func startCaddy(t *testing.T, f *gatewayFixture) string {
	t.Helper()
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
	return f.run(t, "caddy", env, "run", "--config", path, "--adapter", "caddyfile")
}

// startNginx runs nginx with the documented server block pointed at f.
func startNginx(t *testing.T, f *gatewayFixture) string {
	t.Helper()
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
	return f.run(t, "nginx", nil, "-p", d+"/", "-c", path, "-e", d+"/error.log", "-g", "daemon off;")
}

func TestCaddyForwardAuth(t *testing.T) {
	f := newGatewayFixture(t)
	base := startCaddy(t, f)
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
	base := startNginx(t, f)
	resp := checkGateway(t, base, f.up)
	// nginx adds the fields to admitted responses as well.
	if v := resp.Header.Get("RateLimit"); !strings.HasPrefix(v, `"api_reads";r=`) {
		t.Errorf("admitted response: RateLimit = %q", v)
	}
}
