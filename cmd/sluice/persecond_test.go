package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestRedisPerSecond: serve given envoyproxy/ratelimit's REDIS_* and
// REDIS_PERSECOND_* variables counts the per-second limits on the second
// Redis and the others on the first; a request over both is decided all or
// nothing: denied by its per-second limit, its hourly one is not charged.
func TestRedisPerSecond(t *testing.T) {
	main, perSecond := redistest.Start(t), redistest.Start(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "edge.yaml"), `domain: edge
descriptors:
  - key: user
    # Routed as a per-second limit (a period under a minute), but its
    # keys outlive a slow test's KEYS by far.
    rate_limit: {unit: second, unit_multiplier: 30, requests_per_unit: 1}
  - key: team
    rate_limit: {unit: hour, requests_per_unit: 3}
`)
	o, code, stderr := serveFlagsIn(t, map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": main.Addr(),
		"REDIS_PERSECOND": "true", "REDIS_PERSECOND_SOCKET_TYPE": "tcp", "REDIS_PERSECOND_URL": perSecond.Addr()})
	if code >= 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	o.configs, o.httpAddr, o.grpcAddr, o.healthAddr, o.drain, o.shutdown = cli.StringList{dir}, "127.0.0.1:0", "127.0.0.1:0", "", 0, 5*time.Second
	srv, logs := startWith(t, o)
	conn, err := grpc.NewClient(srv.grpcAddr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rls := rlsv3.NewRateLimitServiceClient(conn)
	// ask sends one request of a descriptor per pair of kv; a peek charges
	// nothing (hits_addend 0 on each descriptor).
	ask := func(peek bool, kv ...string) *rlsv3.RateLimitResponse {
		t.Helper()
		req := &rlsv3.RateLimitRequest{Domain: "edge"}
		for i := 0; i < len(kv); i += 2 {
			d := &commonv3.RateLimitDescriptor{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: kv[i], Value: kv[i+1]}}}
			if peek {
				d.HitsAddend = wrapperspb.UInt64(0)
			}
			req.Descriptors = append(req.Descriptors, d)
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer rcancel()
		resp, err := rls.ShouldRateLimit(rctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	const ok, over = rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	// The user's per-second limit denies a second request in its window:
	// the team's hourly limit then keeps what it had. A request that lands
	// in the next window is admitted, and the test tries again with
	// another team.
	for i := 0; ; i++ {
		team := "t" + string(rune('a'+i))
		if resp := ask(false, "user", "alice", "team", team); resp.OverallCode != ok {
			continue // the user's second was spent by the last try
		}
		resp := ask(false, "user", "alice", "team", team)
		hourly := ask(true, "team", team).Statuses[0].LimitRemaining
		if resp.OverallCode == over {
			if hourly != 2 {
				t.Fatalf("denied by the per-second limit, yet the hourly one was charged: %d of 3 left", hourly)
			}
			break
		}
		if hourly != 1 {
			t.Fatalf("admitted twice, yet the hourly limit has %d of 3 left", hourly)
		}
		if i > 20 {
			t.Fatal("no two requests fell in one window in 20 tries")
		}
	}
	keys := func(s *redistest.Server) string {
		out, err := s.Do("KEYS", "*")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	onMain, onPerSecond := keys(main), keys(perSecond)
	if !strings.Contains(onMain, "edge.team") || strings.Contains(onMain, "edge.user") {
		t.Errorf("keys on REDIS_URL's Redis: %q, want the team's and not the user's", onMain)
	}
	if !strings.Contains(onPerSecond, "edge.user") || strings.Contains(onPerSecond, "edge.team") {
		t.Errorf("keys on REDIS_PERSECOND_URL's Redis: %q, want the user's and not the team's", onPerSecond)
	}
	if !strings.Contains(logs.String(), "store_per_second=redis://"+perSecond.Addr()) {
		t.Errorf("the start log does not name the per-second Redis:\n%s", logs)
	}
}
