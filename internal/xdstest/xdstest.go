// Package xdstest runs a real xDS management server (go-control-plane's ADS
// server and snapshot cache) on a loopback port, for tests of xDS clients.
package xdstest

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

// NodeID is the node whose snapshots Set sets: the clients under test must
// say they are it.
const NodeID = "sluice-test"

// ControlPlane is a real go-control-plane ADS server on a 127.0.0.1 port,
// serving snapshots from a snapshot cache and recording every request.
type ControlPlane struct {
	// Addr is the address it listens on.
	Addr  string
	t     testing.TB
	cache cache.SnapshotCache
	grpc  *grpc.Server
	done  chan struct{}

	mu       sync.Mutex
	requests []*discovery.DiscoveryRequest
	onSend   func(version string)
}

// Start listens on addr ("127.0.0.1:0" for any port), with opts (such as
// grpc.Creds for TLS); the server stops at cleanup.
func Start(t testing.TB, addr string, opts ...grpc.ServerOption) *ControlPlane {
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
	cp := &ControlPlane{t: t, Addr: lis.Addr().String(), cache: cache.NewSnapshotCache(true, cache.IDHash{}, nil),
		grpc: grpc.NewServer(opts...), done: make(chan struct{})}
	callbacks := server.CallbackFuncs{StreamRequestFunc: func(_ int64, req *discovery.DiscoveryRequest) error {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		cp.requests = append(cp.requests, req)
		return nil
	}, StreamResponseFunc: func(_ context.Context, _ int64, _ *discovery.DiscoveryRequest, resp *discovery.DiscoveryResponse) {
		cp.mu.Lock()
		f := cp.onSend
		cp.mu.Unlock()
		if f != nil {
			f(resp.GetVersionInfo())
		}
	}}
	discovery.RegisterAggregatedDiscoveryServiceServer(cp.grpc, server.NewServer(context.Background(), cp.cache, callbacks))
	go func() {
		defer close(cp.done)
		_ = cp.grpc.Serve(lis)
	}()
	t.Cleanup(cp.Stop)
	return cp
}

// Stop ends the server and every stream on it.
func (cp *ControlPlane) Stop() {
	cp.grpc.Stop()
	<-cp.done
}

// Set makes version, holding configs, what the server sends NodeID.
func (cp *ControlPlane) Set(version string, configs ...*rlsconf.RateLimitConfig) {
	cp.t.Helper()
	res := make([]types.Resource, len(configs))
	for i, c := range configs {
		res[i] = c
	}
	snap, err := cache.NewSnapshot(version, map[resource.Type][]types.Resource{resource.RateLimitConfigType: res})
	if err != nil {
		cp.t.Fatal(err)
	}
	if err := cp.cache.SetSnapshot(context.Background(), NodeID, snap); err != nil {
		cp.t.Fatal(err)
	}
}

// OnSend has f called with the version of every response, just before the
// server sends it.
func (cp *ControlPlane) OnSend(f func(version string)) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.onSend = f
}

// Seen returns the first request received that satisfies ok, or nil.
func (cp *ControlPlane) Seen(ok func(*discovery.DiscoveryRequest) bool) *discovery.DiscoveryRequest {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, r := range cp.requests {
		if ok(r) {
			return r
		}
	}
	return nil
}

// Domain is a RateLimitConfig with one descriptor, key=value, limited
// to perMinute requests a minute.
func Domain(domain, key, value string, perMinute uint32) *rlsconf.RateLimitConfig {
	return &rlsconf.RateLimitConfig{Name: domain, Domain: domain, Descriptors: []*rlsconf.RateLimitDescriptor{{
		Key: key, Value: value,
		RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: perMinute},
	}}}
}
