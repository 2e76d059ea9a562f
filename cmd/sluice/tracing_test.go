package main

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/tracing/tracingtest"
)

// TestServeTracing: with OTEL_EXPORTER_OTLP_ENDPOINT set, serve exports a
// span for an HTTP check, one for an RLS call and one for each store call
// to an OTLP receiver on loopback, the HTTP one in the caller's trace; the
// last spans are flushed at shutdown.
func TestServeTracing(t *testing.T) {
	r, endpoint := tracingtest.StartGRPC(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_SERVICE_NAME", "sluice-test")
	srv, _, logs := startTestServer(t, "")

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, err := http.NewRequest("POST", "http://"+srv.httpAddr.String()+"/v1/check", strings.NewReader(`{"policy":"api_per_key","key":"alice"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("check: %d", resp.StatusCode)
	}
	conn, err := grpc.NewClient(srv.grpcAddr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge",
		Descriptors: []*commonv3.RateLimitDescriptor{{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}}}}); err != nil {
		t.Fatal(err)
	}

	srv.shutdown()
	srv.wait() // flushes the spans
	count := map[string]int{}
	for _, s := range r.Spans() {
		count[s.GetName()]++
		if s.Service != "sluice-test" {
			t.Errorf("span %q of service %q, want OTEL_SERVICE_NAME's", s.GetName(), s.Service)
		}
		if s.GetName() == "POST /v1/check" && hex.EncodeToString(s.GetTraceId()) != traceID {
			t.Errorf("the check's span is in trace %x, not the caller's", s.GetTraceId())
		}
	}
	want := map[string]int{"POST /v1/check": 1, "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit": 1, "sluice.store/Decide": 2}
	for name, n := range want {
		if count[name] != n {
			t.Errorf("%d spans %q received, want %d (all: %v)", count[name], name, n, count)
		}
	}
	if !strings.Contains(logs.String(), "tracing on") {
		t.Errorf("the log does not say tracing is on:\n%s", logs)
	}
}

// TestServeTracingRefusesBadSettings: a tracing setting serve cannot honour
// stops it at start, naming the variable.
func TestServeTracingRefusesBadSettings(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	log, _ := newLogger(io.Discard, "text", "info")
	dir := t.TempDir()
	writeFile(t, dir+"/sluice.yaml", nativeConfig)
	_, err := startServer(context.Background(), serveOptions{configs: cli.StringList{dir + "/sluice.yaml"},
		httpAddr: "127.0.0.1:0", grpcAddr: "127.0.0.1:0", shutdown: time.Second}, log)
	if err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
		t.Fatalf("started, or failed without naming the variable: %v", err)
	}
}
