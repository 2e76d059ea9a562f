package main

import (
	"context"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/xdstest"
)

// TestServeFromXDS: serve with no file takes its domains from an xDS
// server; decisions follow them; a version that does not validate is NACKed
// and changes no decision.
func TestServeFromXDS(t *testing.T) {
	cp := xdstest.Start(t, "127.0.0.1:0")
	perDay := func(n uint32) *rlsconf.RateLimitConfig {
		c := xdstest.Domain("edge", "remote_address", "", n)
		c.Descriptors[0].RateLimit.Unit = rlsconf.RateLimitUnit_DAY // no window ends during the test
		return c
	}
	cp.Set("v1", perDay(2))

	logs := &syncBuffer{}
	log, _ := newLogger(logs, "text", "info")
	ctx, cancel := context.WithCancel(context.Background())
	o := serveOptions{httpAddr: "127.0.0.1:0", grpcAddr: "127.0.0.1:0", shutdown: 5 * time.Second,
		xds: xdsOptions{server: cp.Addr, nodeID: xdstest.NodeID}}
	srv, err := startServer(ctx, o, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	defer func() { cancel(); srv.wait() }()

	conn, err := grpc.NewClient(srv.grpcAddr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rls := rlsv3.NewRateLimitServiceClient(conn)
	call := func(ip string) *rlsv3.RateLimitResponse {
		t.Helper()
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		resp, err := rls.ShouldRateLimit(cctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*commonv3.RateLimitDescriptor{
			{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: ip}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	expect := func(ip string, codes ...rlsv3.RateLimitResponse_Code) {
		t.Helper()
		for i, want := range codes {
			if got := call(ip).GetOverallCode(); got != want {
				t.Fatalf("%s request %d: %v, want %v", ip, i+1, got, want)
			}
		}
	}
	// Until v1 is applied the domain is unknown and has no limit; the probe
	// uses an address of its own so that it charges nothing the test counts.
	xdstest.WaitFor(t, "v1 in force", func() bool {
		st := call("10.9.9.9").GetStatuses()
		return len(st) == 1 && st[0].GetCurrentLimit().GetRequestsPerUnit() == 2
	})
	const ok, over = rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	expect("10.0.0.1", ok, ok, over)

	bad := perDay(50)
	bad.Descriptors[0].Key = ""
	cp.Set("v2", bad)
	xdstest.WaitFor(t, "the NACK of v2", func() bool {
		return cp.Seen(func(r *discovery.DiscoveryRequest) bool { return r.GetErrorDetail() != nil }) != nil
	})
	expect("10.0.0.1", over)
	expect("10.0.0.2", ok, ok, over)
	if !strings.Contains(logs.String(), "xDS configuration rejected") {
		t.Errorf("the rejection is not logged:\n%s", logs)
	}
}

// TestXDSFlags: envoyproxy/ratelimit's variables give the defaults only when
// it is configured for xDS; bad node metadata is a usage error.
func TestXDSFlags(t *testing.T) {
	env := map[string]string{"CONFIG_GRPC_XDS_SERVER_URL": "cp:18000", "CONFIG_GRPC_XDS_NODE_ID": "rl",
		"CONFIG_GRPC_XDS_NODE_METADATA": "a=b"}
	for _, xdsType := range []bool{false, true} {
		if xdsType {
			env["CONFIG_TYPE"] = "GRPC_XDS_SOTW"
		}
		var x xdsOptions
		x.addFlags(flag.NewFlagSet("t", flag.ContinueOnError), func(k string) string { return env[k] })
		want := xdsOptions{nodeID: "default"}
		if xdsType {
			want = xdsOptions{server: "cp:18000", nodeID: "rl", metadata: "a=b"}
		}
		if x != want {
			t.Errorf("CONFIG_TYPE=%q: %+v, want %+v", env["CONFIG_TYPE"], x, want)
		}
	}
	md, err := (&xdsOptions{metadata: " zone=a , tier=gold=1"}).nodeMetadata()
	if err != nil || len(md) != 2 || md["zone"] != "a" || md["tier"] != "gold=1" {
		t.Errorf("metadata %v %v", md, err)
	}
	var errb strings.Builder
	code := runServe(context.Background(), []string{"--xds-server", "127.0.0.1:1", "--xds-node-metadata", "zone"}, io.Discard, &errb)
	if code != 2 || !strings.Contains(errb.String(), `--xds-node-metadata: "zone" is not key=value`) {
		t.Errorf("bad metadata: exit %d %q", code, errb.String())
	}
}
