package tracing_test

import (
	"context"
	"net"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/codes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/tracing"
)

// rls serves svc's RLS on 127.0.0.1 and returns a client.
func rls(t *testing.T, svc *service.Service) rlsv3.RateLimitServiceClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	envoyrls.New(svc).Register(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

func TestRLSSpans(t *testing.T) {
	svc, rec := traced(t, memoryStack, false)
	client := rls(t, svc)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", traceparent)
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: secretEnvoyKey}}},
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "unmatched", Value: "x"}}},
	}}
	for i, want := range []struct {
		code    rlsv3.RateLimitResponse_Code
		outcome string
	}{{rlsv3.RateLimitResponse_OK, tracing.OutcomeAllowed}, {rlsv3.RateLimitResponse_OVER_LIMIT, tracing.OutcomeDenied}} {
		rec.Reset()
		resp, err := client.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.OverallCode != want.code {
			t.Fatalf("call %d: %v, want %v", i, resp.OverallCode, want.code)
		}
		spans := rec.Ended()
		front, store := byName(t, spans, envoyrls.ServiceName+"/ShouldRateLimit")
		wantChildOfClient(t, front)
		wantAttr(t, front, "rpc.system", "grpc")
		wantAttr(t, front, "rpc.grpc.status_code", int64(0))
		wantAttr(t, front, tracing.KeyDomain, "edge")
		wantAttr(t, front, tracing.KeyDescriptors, int64(2))
		wantAttr(t, front, tracing.KeyChecks, int64(1))
		wantAttr(t, front, tracing.KeyOutcome, want.outcome)
		wantAttr(t, front, tracing.KeyAllowed, want.outcome == tracing.OutcomeAllowed)
		if len(store) != 1 {
			t.Fatalf("call %d: %d store spans, want 1", i, len(store))
		}
		wantChildOf(t, store[0], front)
		wantAttr(t, store[0], tracing.KeyAllowed, want.outcome == tracing.OutcomeAllowed)
		noKeys(t, spans, secretEnvoyKey)
	}
}

func TestRLSInvalidRequestSpan(t *testing.T) {
	svc, rec := traced(t, memoryStack, false)
	client := rls(t, svc)
	if _, err := client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge"}); err == nil {
		t.Fatal("a request without descriptors was accepted")
	}
	front, _ := byName(t, rec.Ended(), envoyrls.ServiceName+"/ShouldRateLimit")
	wantAttr(t, front, "rpc.grpc.status_code", int64(3)) // InvalidArgument
	wantAttr(t, front, tracing.KeyErrorType, "InvalidArgument")
	wantAttr(t, front, tracing.KeyOutcome, tracing.OutcomeError)
	if front.Status().Code != codes.Error {
		t.Errorf("status %v, want an error", front.Status())
	}
	if front.Parent().IsValid() {
		t.Errorf("no traceparent was sent, yet the span has parent %v", front.Parent().SpanID())
	}
}

// TestRLSDegradedSpan: failing closed, Envoy is told OVER_LIMIT, and the
// span says the fail policy decided it.
func TestRLSDegradedSpan(t *testing.T) {
	svc, rec := traced(t, openStack(t, config.Store{URL: deadRedis(t), OnError: "closed"}), false)
	resp, err := rls(t, svc).ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: secretEnvoyKey}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("failing closed answered %v", resp.OverallCode)
	}
	spans := rec.Ended()
	front, store2 := byName(t, spans, envoyrls.ServiceName+"/ShouldRateLimit")
	wantAttr(t, front, tracing.KeyOutcome, tracing.OutcomeDenied)
	wantAttr(t, front, tracing.KeyAllowed, false)
	for _, s := range append(store2, front) {
		wantAttr(t, s, tracing.KeyDegraded, true)
		wantAttr(t, s, tracing.KeyFailPolicy, "closed")
	}
	noKeys(t, spans, secretEnvoyKey)
}
