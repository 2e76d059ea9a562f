package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/internal/xdstest"
)

// TestBoundsFlagsOnFiles: --max-descriptors bounds the files serve and
// validate load; the two refuse alike, and a bound that is not positive is a
// usage error.
func TestBoundsFlagsOnFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "edge.yaml")
	var b strings.Builder
	b.WriteString("domain: edge\ndescriptors:\n")
	for i := range 5 {
		fmt.Fprintf(&b, "  - {key: user, value: u%d, rate_limit: {unit: minute, requests_per_unit: 5}}\n", i)
	}
	writeFile(t, path, b.String())
	const want = "more than 4 descriptors in one configuration, the bound (--max-descriptors)"
	if code, _, out := runCmd("validate", "--max-descriptors", "4", path); code != 1 || !strings.Contains(out, want) {
		t.Errorf("validate over the bound: exit %d, %q", code, out)
	}
	if code, _, out := runCmd("serve", "--config", path, "--max-descriptors", "4", "--http-addr", "127.0.0.1:0", "--grpc-addr", ""); code != 1 ||
		!strings.Contains(out, want) {
		t.Errorf("serve over the bound: exit %d, %q", code, out)
	}
	if code, _, out := runCmd("validate", "--max-descriptors", "5", path); code != 0 {
		t.Errorf("validate within the bound: exit %d, %q", code, out)
	}
	for _, args := range [][]string{{"validate", "--max-descriptors", "0", path}, {"validate", "--max-descriptor-depth", "1001", path},
		{"serve", "--config", path, "--xds-max-bytes", "0"}, {"serve", "--config", path, "--max-descriptor-depth", "0"}} {
		if code, _, out := runCmd(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2: %q", args, code, out)
		}
	}
}

// TestBoundsFlagsOnXDS: serve's --max-descriptors bounds every version from
// the xDS server: one past it is NACKed naming the flag, and the next one
// within it is applied.
func TestBoundsFlagsOnXDS(t *testing.T) {
	cp := xdstest.Start(t, "127.0.0.1:0")
	version := func(n int) *rlsconf.RateLimitConfig {
		rc := xdstest.Domain("edge", "remote_address", "", uint32(n))
		for i := 1; i < n; i++ {
			rc.Descriptors = append(rc.Descriptors, &rlsconf.RateLimitDescriptor{Key: "user", Value: fmt.Sprint("u", i),
				RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: 1}})
		}
		return rc
	}
	cp.Set("v1", version(5))
	var o serveOptions
	fs := newServeFlags(&o, io.Discard)
	if code := cli.ParseFlags(fs, []string{"--xds-server", cp.Addr, "--xds-node-id", xdstest.NodeID, "--max-descriptors", "3",
		"--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0", "--xds-wait", "0"}); code >= 0 {
		t.Fatalf("flags: %d", code)
	}
	log, _ := newLogger(io.Discard, "text", "error")
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := startServer(ctx, o, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.wait() })

	var nack *discovery.DiscoveryRequest
	testwait.Until(t, "the NACK of v1", func() bool {
		nack = cp.Seen(func(r *discovery.DiscoveryRequest) bool { return r.GetErrorDetail() != nil })
		return nack != nil
	})
	if msg := nack.GetErrorDetail().GetMessage(); !strings.Contains(msg, "the version has 5 descriptors, over the bound of 3 (--max-descriptors)") {
		t.Errorf("NACK reason %q", msg)
	}
	cp.Set("v2", version(3))
	testwait.Until(t, "v2, within the bound, applied", func() bool { return srv.svc.Config().Policy("edge.user_u2") != nil })
}
