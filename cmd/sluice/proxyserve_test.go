package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
)

// proxied is a `sluice proxy` started in-process with a health port, in
// front of a test upstream.
type proxied struct {
	srv    *proxyServer
	stop   context.CancelFunc // as SIGTERM
	logs   *syncBuffer
	base   string // the proxy
	health string // the health port
	config string // its configuration file
}

func startProxyWith(t *testing.T, cfg string, mod func(*proxyOptions)) *proxied {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "upstream") }))
	t.Cleanup(up.Close)
	path := filepath.Join(t.TempDir(), "proxy.yaml")
	writeFile(t, path, cfg)
	p := &proxied{logs: &syncBuffer{}, config: path}
	log, _ := newLogger(p.logs, "text", "info")
	ctx, cancel := context.WithCancel(context.Background())
	o := proxyOptions{configs: cli.StringList{path}, upstream: up.URL, listen: "127.0.0.1:0", healthAddr: "127.0.0.1:0",
		shutdown: waitLimit}
	if mod != nil {
		mod(&o)
	}
	srv, err := startProxy(ctx, o, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.endDrainNow(); srv.wait() })
	p.srv, p.stop, p.base, p.health = srv, cancel, "http://"+srv.addr.String(), "http://"+srv.healthAddr.String()
	return p
}

// getFresh answers GET url on a new connection (a drain must still accept them): status and body, or the error.
func getFresh(url string) (int, string, error) {
	c := &http.Client{Timeout: waitLimit, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// ready is /readyz of the health port: its status code and reply.
func (p *proxied) ready(t *testing.T) (int, readyReply, string) {
	t.Helper()
	return p.readyAt(t, "/readyz")
}

// readyAt is a readiness path of the health port.
func (p *proxied) readyAt(t *testing.T, path string) (int, readyReply, string) {
	t.Helper()
	code, body, err := getFresh(p.health + path)
	if err != nil {
		t.Fatal(err)
	}
	var r readyReply
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("%s: %d %q: %v", path, code, body, err)
	}
	return code, r, body
}

// proxyOpenConfig is proxyTestConfig with room for the few requests a test
// makes.
var proxyOpenConfig = strings.Replace(proxyTestConfig, "limit: 1\n", "limit: 1000\n", 1)

// TestProxyHealthAndDrain: the health port answers /healthz, /readyz and
// /metrics; on SIGTERM the proxy drains — /readyz 503 while requests, on
// new connections too, are still proxied — then closes its listeners.
func TestProxyHealthAndDrain(t *testing.T) {
	p := startProxyWith(t, proxyOpenConfig, func(o *proxyOptions) { o.drain = time.Hour })
	if code, body, err := getFresh(p.health + "/healthz"); err != nil || code != 200 {
		t.Fatalf("/healthz: %d %q %v", code, body, err)
	}
	if code, r, body := p.ready(t); code != 200 || r.Status != "ready" || !r.Store.Ready {
		t.Fatalf("/readyz before the signal: %d %s", code, body)
	}
	if code, body, err := getFresh(p.base + "/x"); err != nil || code != 200 || body != "upstream" {
		t.Fatalf("proxied before the signal: %d %q %v", code, body, err)
	}
	code, metrics, err := getFresh(p.health + "/metrics")
	if err != nil || code != 200 || !strings.Contains(metrics, `sluice_connections_open{listener="http"}`) {
		t.Fatalf("/metrics: %d %v; want the proxy port's connections:\n%s", code, err, metrics)
	}

	p.stop()
	testwait.UntilSaw(t, "/readyz draining", func() (bool, string) {
		code, r, body := p.ready(t)
		return code == 503 && r.Status == "draining", body
	})
	for i := range 3 {
		if code, body, err := getFresh(p.base + "/x"); err != nil || code != 200 || body != "upstream" {
			t.Fatalf("proxied request %d while draining: %d %q %v", i, code, body, err)
		}
	}
	p.srv.endDrainNow()
	for _, addr := range []string{p.srv.addr.String(), p.srv.healthAddr.String()} {
		refusesConnections(t, addr)
	}
	p.srv.wait()
	logs := p.logs.String()
	if d, st, end := strings.Index(logs, "draining"), strings.Index(logs, "shutting down"), strings.Index(logs, "stopped"); d < 0 || st < d || end < st {
		t.Errorf("want draining, shutting down, stopped:\n%s", logs)
	}
}

// TestProxyReadyFollowsStore: /readyz/store says whether the Redis store
// decides: ready, then 503 with the store's error once Redis is gone, then
// ready again once it is back; /readyz stays 200 throughout, since the fail
// policy answers while Redis cannot.
func TestProxyReadyFollowsStore(t *testing.T) {
	r := redistest.Start(t)
	p := startProxyWith(t, proxyOpenConfig, func(o *proxyOptions) { o.storeURL = r.URL() })
	testwait.UntilSaw(t, "ready on Redis", func() (bool, string) {
		code, rr, body := p.readyAt(t, "/readyz/store")
		return code == 200 && rr.Store.Ready, body
	})
	r.Kill()
	testwait.UntilSaw(t, "not store-ready with Redis gone", func() (bool, string) {
		code, rr, body := p.readyAt(t, "/readyz/store")
		return code == 503 && rr.Status == "unavailable" && rr.Store.Error != "", body
	})
	if code, rr, body := p.ready(t); code != 200 || rr.Status != "degraded" || rr.Store.OnError != "local" {
		t.Errorf("/readyz with Redis gone: %d %s; want 200 degraded, answering by on_error local", code, body)
	}
	// The fail policy (local by default) still answers: the proxy serves.
	if code, body, err := getFresh(p.base + "/x"); err != nil || code != 200 {
		t.Errorf("proxied with Redis gone: %d %q %v", code, body, err)
	}
	r.Restart()
	testwait.UntilSaw(t, "ready again with Redis back", func() (bool, string) {
		code, rr, body := p.readyAt(t, "/readyz/store")
		return code == 200 && rr.Store.Ready, body
	})
}

// TestProxyStoreErrorsLocated: a bad store section in the proxy's
// configuration is refused at start with its file and line, as serve and
// validate report it; a bad --store is reported against the flag.
func TestProxyStoreErrorsLocated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "proxy.yaml")
	writeFile(t, path, "store:\n  url: redis://127.0.0.1:1\n  password_file: missing.pass\n"+proxyOpenConfig)
	args := []string{"proxy", "--config", path, "--upstream", "http://127.0.0.1:9", "--listen", "127.0.0.1:0", "--health-addr", ""}
	code, _, out := runCmd(args...)
	if want := fmt.Sprintf("%s:3:", path); code != 1 || !strings.HasPrefix(out, want) || !strings.Contains(out, "store.password_file: ") {
		t.Errorf("proxy: exit %d, stderr %q; want 1 and %q … store.password_file", code, out, want)
	}
	writeFile(t, path, proxyOpenConfig)
	code, _, out = runCmd(append(args, "--store", "redis://127.0.0.1:1/abc")...)
	if code != 1 || !strings.Contains(out, "--store: redis: invalid database number") {
		t.Errorf("proxy --store bad: exit %d, stderr %q", code, out)
	}
}
