package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/testwait"
)

// On SIGTERM serve drains: readiness says no on both APIs while kept-alive
// clients and new connections are still answered; when the drain ends the
// listeners close and a request in flight still completes.
func TestServeDrains(t *testing.T) {
	dir := t.TempDir()
	native, envoy := filepath.Join(dir, "sluice.yaml"), filepath.Join(dir, "envoy.yaml")
	writeFile(t, native, nativeConfig)
	writeFile(t, envoy, envoyConfig)
	logs := &syncBuffer{}
	log, _ := newLogger(logs, "text", "info")
	ctx, sigterm := context.WithCancel(context.Background())
	// The drain is long so that nothing below races it; the test ends it.
	o := serveOptions{configs: cli.StringList{native, envoy}, httpAddr: "127.0.0.1:0", grpcAddr: "127.0.0.1:0",
		shutdown: waitLimit, drain: time.Hour}
	srv, err := startServer(ctx, o, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sigterm(); srv.endDrainNow(); srv.wait() })
	base, httpAddr, grpcAddr := "http://"+srv.httpAddr.String(), srv.httpAddr.String(), srv.grpcAddr.String()

	// A kept-alive HTTP client that counts its connections, and a gRPC
	// connection, both in use before the signal.
	var dials atomic.Int32
	client := &http.Client{Timeout: waitLimit, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	checkStatus := func(key string) int {
		t.Helper()
		resp, err := client.Post(base+"/v1/check", "application/json", strings.NewReader(`{"policy":"api_per_key","key":"`+key+`"}`))
		if err != nil {
			t.Fatalf("kept-alive client: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	health, rls := healthpb.NewHealthClient(conn), rlsv3.NewRateLimitServiceClient(conn)
	rlsReq := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*commonv3.RateLimitDescriptor{
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}}}}
	if st := checkStatus("alice"); st != 200 {
		t.Fatalf("before the signal: %d", st)
	}
	if r, err := health.Check(rctx, &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before the signal: %v %v", r, err)
	}

	sigterm()
	testwait.UntilSaw(t, "/readyz draining", func() (bool, string) {
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 503 && strings.Contains(string(b), `"draining"`), strconv.Itoa(resp.StatusCode) + " " + string(b)
	})
	if r, err := health.Check(rctx, &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("gRPC health while draining: %v %v, want NOT_SERVING", r, err)
	}
	// A request in flight across the end of the drain: headers and half its
	// body now, the rest once the listeners are closed.
	body := `{"policy":"api_per_key","key":"carol"}`
	openConns := func() int {
		resp, err := client.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		_, after, _ := strings.Cut(string(b), "\n"+`sluice_connections_open{listener="http"} `)
		line, _, _ := strings.Cut(after, "\n")
		n, err := strconv.Atoi(line)
		if err != nil {
			t.Fatalf("sluice_connections_open: %q", line)
		}
		return n
	}
	before := openConns()
	inflight := dialRaw(t, httpAddr)
	io.WriteString(inflight, "POST /v1/check HTTP/1.1\r\nHost: sluice\r\nContent-Type: application/json\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n"+body[:10])

	// The server must have accepted it before the listener closes, or the
	// kernel resets it with the listener's queue.
	testwait.UntilSaw(t, "the connection in flight accepted", func() (bool, string) {
		n := openConns()
		return n > before, strconv.Itoa(n)
	})
	// Still deciding: on the kept-alive connection, on gRPC, on a new connection.
	if st := checkStatus("alice"); st != 200 {
		t.Errorf("kept-alive check while draining: %d", st)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("the kept-alive client dialled %d times, want 1", n)
	}
	if r, err := rls.ShouldRateLimit(rctx, rlsReq); err != nil || r.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Errorf("RLS while draining: %v %v", r, err)
	}
	if st, body := postJSON(t, base+"/v1/check", `{"policy":"api_per_key","key":"bob"}`); st != 200 {
		t.Errorf("new connection while draining: %d %s", st, body)
	}

	srv.endDrainNow()
	for _, addr := range []string{httpAddr, grpcAddr} {
		refusesConnections(t, addr)
	}
	io.WriteString(inflight, body[10:])
	inflight.SetReadDeadline(time.Now().Add(waitLimit))
	resp, err := http.ReadResponse(bufio.NewReader(inflight), nil)
	if err != nil {
		t.Fatalf("the request in flight got no answer: %v\n%s", err, logs)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"allowed":true`) {
		t.Errorf("the request in flight: %d %s", resp.StatusCode, b)
	}

	stopped := make(chan struct{})
	go func() { srv.wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(2 * waitLimit):
		t.Fatal("serve did not stop")
	}
	for _, want := range []string{"draining", "shutting down", "stopped"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if _, err := rls.ShouldRateLimit(rctx, rlsReq); err == nil {
		t.Error("RLS answered after the shutdown")
	} else if errors.Is(err, context.DeadlineExceeded) {
		t.Error("RLS hung after the shutdown")
	}
}

// refusesConnections waits until nothing listens on addr any more.
func refusesConnections(t *testing.T, addr string) {
	t.Helper()
	testwait.UntilSaw(t, "refusing connections on "+addr, func() (bool, string) {
		c, err := net.DialTimeout("tcp", addr, waitLimit)
		if err != nil {
			return true, err.Error()
		}
		c.Close()
		return false, "connected"
	})
}

// A second SIGTERM during the drain ends it: serve stops at once instead of
// waiting out --drain. The signal is real, sent to this process, which serve
// is listening for while /readyz says draining.
func TestServeSecondSignalEndsDrain(t *testing.T) {
	s := startServe(t, nativeConfig, func(s *serveSetup) { s.opts.drain = time.Hour })
	s.srv.shutdown() // as the first SIGTERM does
	testwait.UntilSaw(t, "/readyz draining", func() (bool, string) {
		code, r, body := s.ready(t)
		return code == 503 && r.Status == "draining", body
	})
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { s.srv.wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(2 * waitLimit):
		t.Fatal("serve still draining after a second SIGTERM")
	}
	if !strings.Contains(s.logs.String(), "second signal") {
		t.Errorf("log lacks the second signal:\n%s", s.logs)
	}
}

// The drain ends by itself after --drain: serve then stops without a second
// signal.
func TestServeDrainEndsByItself(t *testing.T) {
	s := startServe(t, nativeConfig, func(s *serveSetup) { s.opts.drain = short })
	s.srv.shutdown()
	stopped := make(chan struct{})
	go func() { s.srv.wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(2 * waitLimit):
		t.Fatal("serve still draining long after --drain")
	}
	logs := s.logs.String()
	if d, st := strings.Index(logs, "draining"), strings.Index(logs, "shutting down"); d < 0 || st < d {
		t.Errorf("want draining, then shutting down:\n%s", logs)
	}
}
