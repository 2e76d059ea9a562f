package xdsconfig_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cache "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	server "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
)

// nodeID is the node the tests' clients say they are.
const nodeID = "sluice-test"

// controlPlane is a real go-control-plane ADS server on a 127.0.0.1 port,
// serving snapshots from a snapshot cache and recording every request.
type controlPlane struct {
	t     *testing.T
	addr  string
	cache cache.SnapshotCache
	grpc  *grpc.Server
	done  chan struct{}

	mu       sync.Mutex
	requests []*discovery.DiscoveryRequest
}

// startControlPlane listens on addr ("127.0.0.1:0" for any port); it stops
// at cleanup.
func startControlPlane(t *testing.T, addr string) *controlPlane {
	t.Helper()
	var lis net.Listener
	var err error
	// The port of a server just stopped can take a moment to be free again.
	for deadline := time.Now().Add(30 * time.Second); ; {
		if lis, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	cp := &controlPlane{t: t, addr: lis.Addr().String(), cache: cache.NewSnapshotCache(true, cache.IDHash{}, nil),
		grpc: grpc.NewServer(), done: make(chan struct{})}
	callbacks := server.CallbackFuncs{StreamRequestFunc: func(_ int64, req *discovery.DiscoveryRequest) error {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		cp.requests = append(cp.requests, req)
		return nil
	}}
	discovery.RegisterAggregatedDiscoveryServiceServer(cp.grpc, server.NewServer(context.Background(), cp.cache, callbacks))
	go func() {
		defer close(cp.done)
		_ = cp.grpc.Serve(lis)
	}()
	t.Cleanup(cp.stop)
	return cp
}

// stop ends the server and every stream on it.
func (cp *controlPlane) stop() {
	cp.grpc.Stop()
	<-cp.done
}

// set makes version, holding configs, what the server sends the test node.
func (cp *controlPlane) set(version string, configs ...*rlsconf.RateLimitConfig) {
	cp.t.Helper()
	res := make([]types.Resource, len(configs))
	for i, c := range configs {
		res[i] = c
	}
	snap, err := cache.NewSnapshot(version, map[resource.Type][]types.Resource{resource.RateLimitConfigType: res})
	if err != nil {
		cp.t.Fatal(err)
	}
	if err := cp.cache.SetSnapshot(context.Background(), nodeID, snap); err != nil {
		cp.t.Fatal(err)
	}
}

// seen returns the first request recorded that satisfies ok, or nil.
func (cp *controlPlane) seen(ok func(*discovery.DiscoveryRequest) bool) *discovery.DiscoveryRequest {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, r := range cp.requests {
		if ok(r) {
			return r
		}
	}
	return nil
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline: the machine may be loaded, so nothing is assumed about speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// domainConfig is a RateLimitConfig with one descriptor, key=value, limited
// to perMinute requests a minute.
func domainConfig(domain, key, value string, perMinute uint32) *rlsconf.RateLimitConfig {
	return &rlsconf.RateLimitConfig{Name: domain, Domain: domain, Descriptors: []*rlsconf.RateLimitDescriptor{{
		Key: key, Value: value,
		RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: perMinute},
	}}}
}
