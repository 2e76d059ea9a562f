package xdsconfig_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/internal/xdsconfig"
	"github.com/sluicehq/sluice/internal/xdstest"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// node is a Sluice node: a Service on a memory store with a fake clock, its
// Envoy rate limit server, and an xDS client feeding it.
type node struct {
	t   *testing.T
	svc *service.Service
	rls *envoyrls.Server
	reg *prometheus.Registry // the client's metrics
	c   *xdsconfig.Client
}

// startNode starts a node whose files hold files (nil: none) and whose xDS
// client subscribes to the control plane at addr; the client stops at
// cleanup.
func startNode(t *testing.T, addr string, files *config.Config) *node {
	t.Helper()
	return startNodeAs(t, addr, files, xdsconfig.Limits{})
}

// startNodeWithin starts a node without files whose client applies versions
// within lim.
func startNodeWithin(t *testing.T, addr string, lim xdsconfig.Limits) *node {
	t.Helper()
	return startNodeAs(t, addr, nil, lim)
}

func startNodeAs(t *testing.T, addr string, files *config.Config, lim xdsconfig.Limits) *node {
	t.Helper()
	if files == nil {
		var err error
		if files, err = config.ParseDocuments(); err != nil {
			t.Fatal(err)
		}
	}
	clock := storetest.NewClock(storetest.Epoch)
	svc := service.New(storestack.Of(memory.New(memory.WithClock(clock))), files, service.WithLogger(quiet))
	reg := prometheus.NewRegistry()
	c, err := xdsconfig.New(xdsconfig.Options{Server: addr, NodeID: xdstest.NodeID, Apply: svc.ApplyDynamic, Logger: quiet,
		Registerer: reg, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &node{t: t, svc: svc, rls: envoyrls.New(svc, envoyrls.WithClock(clock)), reg: reg, c: c}
}

// metric returns the value of the client's metric name, of the series with
// label result=result when result is set.
func (n *node) metric(name, result string) float64 {
	n.t.Helper()
	families, err := n.reg.Gather()
	if err != nil {
		n.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if result == "" || len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == result {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	n.t.Fatalf("no metric %s{result=%q}", name, result)
	return 0
}

// check asks the node's rate limit server about one descriptor of domain.
func (n *node) check(domain, key, value string) rlsv3.RateLimitResponse_Code {
	n.t.Helper()
	resp, err := n.rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain,
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: value}}}}})
	if err != nil {
		n.t.Fatal(err)
	}
	return resp.GetOverallCode()
}

// expect checks the codes of successive requests for one descriptor.
func (n *node) expect(domain, key, value string, codes ...rlsv3.RateLimitResponse_Code) {
	n.t.Helper()
	for i, want := range codes {
		if got := n.check(domain, key, value); got != want {
			n.t.Fatalf("%s %s=%s request %d: %v, want %v", domain, key, value, i+1, got, want)
		}
	}
}

// limitOf returns the limit in force for domain's key=value, 0 for none.
func (n *node) limitOf(domain, key, value string) int64 {
	m := n.svc.Config().Match(domain, []config.Entry{{Key: key, Value: value}})
	if len(m.Limits) == 0 {
		return 0
	}
	return m.Limits[0].Limit
}

func acked(version string) func(*discovery.DiscoveryRequest) bool {
	return func(r *discovery.DiscoveryRequest) bool {
		return r.GetResponseNonce() != "" && r.GetVersionInfo() == version && r.GetErrorDetail() == nil
	}
}

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

// TestAppliesAndDecides: a version from the server is applied, ACKed, and
// decisions follow it.
func TestAppliesAndDecides(t *testing.T) {
	cp := xdstest.Start(t, "127.0.0.1:0")
	cp.Set("v1", xdstest.Domain("edge", "remote_address", "", 2))
	n := startNode(t, cp.Addr, nil)
	testwait.Until(t, "v1 applied", func() bool { return n.limitOf("edge", "remote_address", "10.0.0.1") == 2 })
	n.expect("edge", "remote_address", "10.0.0.1", ok, ok, over)
	n.expect("edge", "remote_address", "10.0.0.2", ok)
	testwait.Until(t, "the ACK of v1", func() bool { return cp.Seen(acked("v1")) != nil })
	if r := cp.Seen(acked("v1")); r.GetNode().GetId() != xdstest.NodeID || r.GetTypeUrl() != xdsconfig.TypeURL {
		t.Errorf("ACK from node %q for %q", r.GetNode().GetId(), r.GetTypeUrl())
	}
}

// TestApplied: Applied stays open while no version is in force — a NACKed
// first version included — and is closed once one is applied.
func TestApplied(t *testing.T) {
	cp := xdstest.Start(t, "127.0.0.1:0")
	bad := xdstest.Domain("edge", "user", "", 100)
	bad.Descriptors[0].RateLimit.Unit = rlsconf.RateLimitUnit_UNKNOWN
	cp.Set("v1", bad)
	n := startNode(t, cp.Addr, nil)
	testwait.Until(t, "the NACK of v1", func() bool {
		return cp.Seen(func(r *discovery.DiscoveryRequest) bool { return r.GetErrorDetail() != nil }) != nil
	})
	select {
	case <-n.c.Applied():
		t.Fatal("Applied closed with no version in force")
	default:
	}
	cp.Set("v2", xdstest.Domain("edge", "user", "", 5))
	select {
	case <-n.c.Applied():
	case <-time.After(60 * time.Second): // generous: the machine may be loaded
		t.Fatal("Applied not closed after v2")
	}
	if got := n.limitOf("edge", "user", "alice"); got != 5 {
		t.Errorf("limit %d once Applied is closed, want v2's 5", got)
	}
}

// TestNACKKeepsDecisions: an invalid version is NACKed with the reason, the
// configuration in force stays and no decision changes; a later valid
// version is applied.
func TestNACKKeepsDecisions(t *testing.T) {
	cp := xdstest.Start(t, "127.0.0.1:0")
	cp.Set("v1", xdstest.Domain("edge", "user", "", 3))
	n := startNode(t, cp.Addr, nil)
	testwait.Until(t, "v1 applied", func() bool { return n.limitOf("edge", "user", "alice") == 3 })
	n.expect("edge", "user", "alice", ok)
	before := n.svc.Config()

	// A limit of 100 a minute that does not validate: no unit.
	bad := xdstest.Domain("edge", "user", "", 100)
	bad.Descriptors[0].RateLimit.Unit = rlsconf.RateLimitUnit_UNKNOWN
	cp.Set("v2", bad)
	var nack *discovery.DiscoveryRequest
	testwait.Until(t, "the NACK of v2", func() bool {
		nack = cp.Seen(func(r *discovery.DiscoveryRequest) bool { return r.GetErrorDetail() != nil })
		return nack != nil
	})
	if nack.GetVersionInfo() != "v1" || nack.GetResponseNonce() == "" {
		t.Errorf("NACK with version %q nonce %q, want v1 and the response's nonce", nack.GetVersionInfo(), nack.GetResponseNonce())
	}
	if msg := nack.GetErrorDetail().GetMessage(); !strings.Contains(msg, "xds:edge") || !strings.Contains(msg, "unit") {
		t.Errorf("NACK reason %q does not name the resource and the field", msg)
	}
	if n.svc.Config() != before {
		t.Fatal("a NACKed version changed the configuration in force")
	}
	n.expect("edge", "user", "alice", ok, ok, over) // still 3 a minute, counted across

	cp.Set("v3", xdstest.Domain("edge", "user", "", 5))
	testwait.Until(t, "v3 applied", func() bool { return n.limitOf("edge", "user", "alice") == 5 })
	// The counter is kept (same policy name): 3 used of the new 5.
	n.expect("edge", "user", "alice", ok, ok, over)
	testwait.Until(t, "the ACK of v3", func() bool { return cp.Seen(acked("v3")) != nil })
	if acc, rej := n.metric("sluice_xds_updates_total", "accepted"), n.metric("sluice_xds_updates_total", "rejected"); acc < 2 || rej < 1 {
		t.Errorf("updates: %v accepted, %v rejected; want 2 and at least 1", acc, rej)
	}
	if got := n.metric("sluice_xds_connected", ""); got != 1 {
		t.Errorf("sluice_xds_connected %v while connected", got)
	}
}

// TestReconnects: when the server goes away and comes back, the client
// reconnects, resubscribes with the version it has, and applies what the new
// server sends; meanwhile the configuration in force stays.
func TestReconnects(t *testing.T) {
	cp := xdstest.Start(t, "127.0.0.1:0")
	cp.Set("v1", xdstest.Domain("edge", "user", "", 2))
	n := startNode(t, cp.Addr, nil)
	testwait.Until(t, "v1 applied", func() bool { return n.limitOf("edge", "user", "bob") == 2 })
	testwait.Until(t, "the ACK of v1", func() bool { return cp.Seen(acked("v1")) != nil })
	cp.Stop()
	n.expect("edge", "user", "bob", ok, ok, over)
	testwait.Until(t, "sluice_xds_connected 0", func() bool { return n.metric("sluice_xds_connected", "") == 0 })

	again := xdstest.Start(t, cp.Addr)
	again.Set("v2", xdstest.Domain("edge", "user", "", 4))
	testwait.Until(t, "v2 applied", func() bool { return n.limitOf("edge", "user", "bob") == 4 })
	n.expect("edge", "user", "bob", ok, ok, over)
	resub := again.Seen(func(r *discovery.DiscoveryRequest) bool { return r.GetResponseNonce() == "" })
	if resub == nil || resub.GetVersionInfo() != "v1" {
		t.Errorf("resubscribed with %v, want version v1", resub)
	}
}

// TestMergesWithFiles: domains from xDS and from files apply together; a
// domain in both is xDS's, and the files' returns when xDS drops it; a
// version whose policy names clash with the files' is NACKed.
func TestMergesWithFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	files, err := config.Load(write("edge.yaml", `
domain: edge
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1}
`), write("native.yaml", `
policies:
  - {name: clash.user, algorithm: gcra, limit: 5, period: 1m}
`))
	if err != nil {
		t.Fatal(err)
	}
	cp := xdstest.Start(t, "127.0.0.1:0")
	cp.Set("v1", xdstest.Domain("edge", "user", "", 3), xdstest.Domain("api", "path", "/x", 2))
	n := startNode(t, cp.Addr, files)
	testwait.Until(t, "v1 applied", func() bool { return n.limitOf("edge", "user", "u") == 3 })
	if got := n.limitOf("api", "path", "/x"); got != 2 {
		t.Errorf("api limit %d, want 2", got)
	}
	if n.svc.Config().Policy("clash.user") == nil {
		t.Error("the files' native policy is gone")
	}

	cp.Set("v2", xdstest.Domain("api", "path", "/x", 2))
	testwait.Until(t, "edge back from the files", func() bool { return n.limitOf("edge", "user", "u") == 1 })

	before := n.svc.Config()
	cp.Set("v3", xdstest.Domain("clash", "user", "", 9))
	testwait.Until(t, "the NACK of v3", func() bool {
		return cp.Seen(func(r *discovery.DiscoveryRequest) bool {
			return r.GetErrorDetail() != nil && strings.Contains(r.GetErrorDetail().GetMessage(), `"clash.user"`)
		}) != nil
	})
	if n.svc.Config() != before {
		t.Fatal("a NACKed version changed the configuration in force")
	}
}

// TestLargeVersion: a version larger than gRPC's default 4 MiB message
// limit is received and applied.
func TestLargeVersion(t *testing.T) {
	rc := &rlsconf.RateLimitConfig{Name: "big", Domain: "big"}
	long := strings.Repeat("v", 1000)
	for i := range 5000 {
		rc.Descriptors = append(rc.Descriptors, &rlsconf.RateLimitDescriptor{Key: "k", Value: fmt.Sprint(i, long),
			RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_HOUR, RequestsPerUnit: 3}})
	}
	if size := proto.Size(rc); size <= 4<<20 {
		t.Fatalf("the version is %d bytes, not above 4 MiB", size)
	}
	cp := xdstest.Start(t, "127.0.0.1:0")
	cp.Set("v1", rc)
	n := startNode(t, cp.Addr, nil)
	testwait.Until(t, "the large version applied", func() bool { return n.limitOf("big", "k", fmt.Sprint(4999, long)) == 3 })
}
