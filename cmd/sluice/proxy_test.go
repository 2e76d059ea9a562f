package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
)

const proxyTestConfig = `policies:
  - name: per_ip
    algorithm: fixed_window
    limit: 1
    period: 1h
proxy:
  routes:
    - limits: [{policy: per_ip, key: ip}]
`

// TestProxyEndToEnd runs the proxy command's server in-process in front of a
// test upstream: one request passes, the next is denied and not forwarded.
func TestProxyEndToEnd(t *testing.T) {
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "upstream says hi")
	}))
	defer up.Close()
	path := filepath.Join(t.TempDir(), "proxy.yaml")
	writeFile(t, path, proxyTestConfig)

	logs := &syncBuffer{}
	log, _ := newLogger(logs, "text", "info")
	ctx, cancel := context.WithCancel(context.Background())
	o := proxyOptions{configs: cli.StringList{path}, upstream: up.URL, listen: "127.0.0.1:0", shutdown: 5 * time.Second}
	srv, err := startProxy(ctx, o, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	base := "http://" + srv.addr.String()

	resp, err := http.Get(base + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "upstream says hi" || resp.Header.Get("RateLimit") == "" {
		t.Errorf("first: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, err = http.Get(base + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("second: %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("upstream got %d requests, want 1", n)
	}

	cancel()
	done := make(chan struct{})
	go func() { srv.wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("proxy did not shut down")
	}
	if !strings.Contains(logs.String(), "stopped") {
		t.Errorf("logs:\n%s", logs)
	}
}

// TestProxyForwardAuth runs the proxy command with --forward-auth: it
// answers a gateway's questions on /v1/forward-auth and forwards nothing.
func TestProxyForwardAuth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "proxy.yaml")
	writeFile(t, path, proxyTestConfig)
	log, _ := newLogger(io.Discard, "text", "info")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := proxyOptions{configs: cli.StringList{path}, fwdAuth: true, listen: "127.0.0.1:0", shutdown: 5 * time.Second}
	srv, err := startProxy(ctx, o, log)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); srv.wait() }()
	var got []string
	for _, path := range []string{"/v1/forward-auth", "/v1/forward-auth", "/v1/forward-auth/nginx"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+srv.addr.String()+path, nil)
		req.Header.Set("X-Forwarded-Method", "GET")
		req.Header.Set("X-Forwarded-Uri", "/hello")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// The hour's window is aligned to the clock: any wait up to an hour.
		retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		got = append(got, fmt.Sprint(resp.StatusCode, " ", retry > 0 && retry <= 3600))
	}
	if want := []string{"200 false", "429 true", "403 true"}; !slices.Equal(got, want) {
		t.Errorf("answers (status, has Retry-After) %q, want %q", got, want)
	}
}

func TestProxyFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--upstream", "http://127.0.0.1:9"}, 2, "give at least one --config"},
		{[]string{"--config", "x.yaml"}, 2, "give the --upstream URL"},
		{[]string{"--config", "x.yaml", "--upstream", "127.0.0.1:9000"}, 1, "want an http:// or https:// URL"},
		{[]string{"--config", "x.yaml", "--upstream", "http://127.0.0.1:9", "--forward-auth"}, 2, "not both"},
		{[]string{"--help"}, 0, "Proxy puts rate limits in front of an HTTP service"},
		{[]string{"--help"}, 0, "--forward-auth"},
	} {
		var stderr strings.Builder
		code := runProxy(context.Background(), tc.args, io.Discard, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("proxy %v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}
