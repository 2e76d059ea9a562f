package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/internal/xdstest"
)

// rlsClient asks srv's Envoy rate limit API about one descriptor
// key=value in domain, and returns the response.
func rlsClient(t *testing.T, srv *server) func(domain, key, value string) *rlsv3.RateLimitResponse {
	t.Helper()
	conn, err := grpc.NewClient(srv.grpcAddr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rls := rlsv3.NewRateLimitServiceClient(conn)
	return func(domain, key, value string) *rlsv3.RateLimitResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*commonv3.RateLimitDescriptor{
			{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: key, Value: value}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
}

// TestGlobalShadowMode: with --shadow-mode (ratelimit's SHADOW_MODE) no
// request to a rate limit domain is denied over the Envoy rate limit API —
// a file's domain, the same file reloaded with another limit, and a domain
// from the xDS server — while every one of them is still counted (the
// remaining falls to 0); native policies keep their own setting.
func TestGlobalShadowMode(t *testing.T) {
	cp := xdstest.Start(t, "127.0.0.1:0")
	fromXDS := xdstest.Domain("xds", "user", "", 1)
	fromXDS.Descriptors[0].RateLimit.Unit = rlsconf.RateLimitUnit_DAY // no window ends during the test
	cp.Set("v1", fromXDS)
	dir := t.TempDir()
	file := filepath.Join(dir, "edge.yaml")
	perDay := func(n string) string {
		return "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: " + n + "}\n"
	}
	writeFile(t, file, perDay("1"))
	writeFile(t, filepath.Join(dir, "native.yaml"), "policies:\n  - {name: api, algorithm: gcra, limit: 1, period: 1h}\n")
	o := serveOptions{configs: cli.StringList{dir}, httpAddr: "127.0.0.1:0", grpcAddr: "127.0.0.1:0", shutdown: 5 * time.Second,
		xds: xdsOptions{server: cp.Addr, nodeID: xdstest.NodeID}, rl: ratelimitOptions{modes: config.Modes{Shadow: true}}}
	srv, _ := startWith(t, o)
	call := rlsClient(t, srv)
	const ok = rlsv3.RateLimitResponse_OK
	shadowed := func(domain, user string, limit uint32) {
		t.Helper()
		for i := range 3 {
			resp := call(domain, "user", user)
			st := resp.GetStatuses()[0]
			if resp.OverallCode != ok || st.GetCurrentLimit().GetRequestsPerUnit() != limit {
				t.Fatalf("%s request %d: %v, want OK under a limit of %d", domain, i+1, resp, limit)
			}
			if i > 0 && st.LimitRemaining != 0 {
				t.Fatalf("%s request %d: %d remaining, want 0: not counted", domain, i+1, st.LimitRemaining)
			}
		}
	}
	shadowed("edge", "alice", 1)
	testwait.Until(t, "the xDS domain in force", func() bool { return srv.svc.Config().Domains["xds"] != nil })
	shadowed("xds", "alice", 1)

	writeFile(t, file, perDay("2"))
	testwait.Until(t, "the reload", func() bool {
		return call("edge", "user", "probe").GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() == 2
	})
	shadowed("edge", "bob", 2)
	shadowed("xds", "carol", 1)
	if p := srv.svc.Config().Policies["api"]; p == nil || p.Shadow {
		t.Fatalf("the native policy: %+v, want it enforced", p)
	}
}
