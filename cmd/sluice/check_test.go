package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
)

// TestCheckPlan: sluice check --plan decides under that plan's limit, and
// without --plan (or with an unknown plan) under the default plan's.
func TestCheckPlan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, `policies:
  - name: tiered
    algorithm: fixed_window
    limit: 1
    period: 8760h      # a window the test cannot straddle
    plans:
      default: free
      limits:
        free: {limit: 2}
        pro: {limit: 50}
`)
	server := startCheckServer(t, path)
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"--plan", "pro", "--cost", "10"}, 0, "allowed: policy tiered, key \"acme\": 40 of 50 left"},
		{nil, 1, "denied: policy tiered, key \"acme\": 0 of 2 left"},
		{[]string{"--plan", "gold"}, 1, "0 of 2 left"},
		{[]string{"--plan", "pro", "--cost", "0"}, 0, "40 of 50 left"},
	} {
		args := append([]string{"check", "--server", server, "--policy", "tiered", "--key", "acme"}, c.args...)
		code, out, errOut := runCmd(args...)
		if code != c.code || !strings.Contains(out, c.out) {
			t.Errorf("%v: exit %d %q %q; want %d and %q", c.args, code, out, errOut, c.code, c.out)
		}
	}
}

// TestCheckPeek: --cost 0 prints the state as a peek — never "allowed" — and
// says whether a request of cost 1 would be denied; it consumes nothing and
// exits 0.
func TestCheckPeek(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, "policies:\n  - {name: once, algorithm: fixed_window, limit: 1, period: 8760h}\n")
	server := startCheckServer(t, path)
	check := func(cost string) (int, string) {
		code, out, errOut := runCmd("check", "--server", server, "--policy", "once", "--key", "k", "--cost", cost)
		return code, out + errOut
	}
	for _, c := range []struct {
		cost, want string
		code       int
	}{
		{"0", `peek: policy once, key "k": 1 of 1 left, a request of cost up to 1 would be allowed now; full again in `, 0},
		{"1", `allowed: policy once, key "k": 0 of 1 left`, 0},
		{"0", `peek: policy once, key "k": 0 of 1 left, a request of cost 1 would be denied now; full again in `, 0},
		{"1", `denied: policy once, key "k": 0 of 1 left; retry in `, 1},
	} {
		code, out := check(c.cost)
		if code != c.code || !strings.HasPrefix(out, c.want) {
			t.Errorf("--cost %s: exit %d %q; want %d and %q", c.cost, code, out, c.code, c.want)
		}
	}
}

// TestCheckNoServer: with nothing listening, check says where it tried and
// how to point it at a running service.
func TestCheckNoServer(t *testing.T) {
	code, out, errOut := runCmd("check", "--server", "127.0.0.1:1", "--policy", "p", "--key", "k")
	if code != exitError || out != "" {
		t.Fatalf("exit %d, stdout %q; want %d and nothing", code, out, exitError)
	}
	for _, want := range []string{"no answer from the service at http://127.0.0.1:1", "connection refused", "sluice serve", "--server host:port"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// startCheckServer runs serve on the configuration at path, HTTP only, until
// the test ends, and returns its URL.
func startCheckServer(t *testing.T, path string) string {
	t.Helper()
	log, _ := newLogger(&syncBuffer{}, "text", "info")
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := startServer(ctx, serveOptions{configs: cli.StringList{path}, httpAddr: "127.0.0.1:0", shutdown: 5 * time.Second}, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.wait() })
	return "http://" + srv.httpAddr.String()
}
