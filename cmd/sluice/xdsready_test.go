package main

import (
	"strings"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/internal/xdstest"
)

// readyz returns /readyz's status code and body.
func readyz(t *testing.T, srv *server) (int, string) {
	t.Helper()
	return get(t, "http://"+srv.httpAddr.String()+"/readyz")
}

// grpcServing reports whether the gRPC health service says SERVING.
func grpcServing(t *testing.T, srv *server) bool {
	t.Helper()
	st, err := healthFrom("127.0.0.1", srv.grpcAddr.String())
	if err != nil {
		t.Fatalf("gRPC health: %v", err)
	}
	return st == healthpb.HealthCheckResponse_SERVING
}

// TestReadyWaitsForXDS: with --xds-server, /readyz answers 503 "starting"
// and gRPC health NOT_SERVING until the first version from the server is in
// force, then 200 and SERVING.
func TestReadyWaitsForXDS(t *testing.T) {
	cp := xdstest.Start(t, "127.0.0.1:0") // no version yet
	srv, _ := startXDSServer(t, xdsOptions{server: cp.Addr, nodeID: xdstest.NodeID, wait: time.Hour}, "")
	// The client subscribes, and the server has nothing to send: not ready.
	testwait.Until(t, "the subscription", func() bool {
		return cp.Seen(func(*discovery.DiscoveryRequest) bool { return true }) != nil
	})
	if code, body := readyz(t, srv); code != 503 || !strings.Contains(body, `"starting"`) || !strings.Contains(body, "xDS") {
		t.Fatalf("/readyz before any xDS version: %d %s; want 503 starting, waiting for xDS", code, body)
	}
	if grpcServing(t, srv) {
		t.Fatal("gRPC health SERVING before any xDS version; want NOT_SERVING, as /readyz")
	}
	cp.Set("v1", xdstest.Domain("edge", "remote_address", "", 10))
	testwait.Until(t, "/readyz 200 and gRPC SERVING once v1 is applied", func() bool {
		code, _ := readyz(t, srv)
		return code == 200 && grpcServing(t, srv)
	})
}

// TestReadyXDSWaitBounded: --xds-wait bounds the wait: with a server that
// never sends a version, /readyz turns 200 once it has passed, and the log
// says why.
func TestReadyXDSWaitBounded(t *testing.T) {
	cp := xdstest.Start(t, "127.0.0.1:0")
	srv, logs := startXDSServer(t, xdsOptions{server: cp.Addr, nodeID: xdstest.NodeID, wait: short}, "")
	testwait.Until(t, "/readyz 200 and gRPC SERVING after --xds-wait", func() bool {
		code, _ := readyz(t, srv)
		return code == 200 && grpcServing(t, srv)
	})
	if !strings.Contains(logs.String(), "within --xds-wait") {
		t.Errorf("the end of the wait is not logged:\n%s", logs)
	}
	if cp.Seen(func(r *discovery.DiscoveryRequest) bool { return r.GetVersionInfo() != "" }) != nil {
		t.Error("a version was applied; the test wants none")
	}
}

// TestReadyNoXDSWait: --xds-wait 0 does not wait.
func TestReadyNoXDSWait(t *testing.T) {
	cp := xdstest.Start(t, "127.0.0.1:0")
	srv, _ := startXDSServer(t, xdsOptions{server: cp.Addr, nodeID: xdstest.NodeID}, "")
	if code, body := readyz(t, srv); code != 200 || !grpcServing(t, srv) {
		t.Errorf("/readyz with --xds-wait 0: %d %s, gRPC SERVING %v", code, body, grpcServing(t, srv))
	}
}
