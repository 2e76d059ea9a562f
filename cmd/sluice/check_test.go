package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	log, _ := newLogger(&syncBuffer{}, "text", "info")
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := startServer(ctx, serveOptions{configs: stringList{path}, httpAddr: "127.0.0.1:0", grpcAddr: "127.0.0.1:0", shutdown: 5 * time.Second}, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.wait() })
	server := "http://" + srv.httpAddr.String()
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
