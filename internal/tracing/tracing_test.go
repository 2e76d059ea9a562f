package tracing_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/envoyrls"
	"github.com/sluicehq/sluice/httpapi"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/service"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// A parent span as a client would send it in traceparent.
const (
	parentTrace    = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentSpan     = "00f067aa0ba902b7"
	traceparent    = "00-" + parentTrace + "-" + parentSpan + "-01"
	secretKey      = "alice@example.com"
	secretEnvoyKey = "203.0.113.7"
)

const policiesYAML = `
policies:
  - name: per_user
    algorithm: fixed_window
    limit: 2
    period: 1h
  - name: per_user_shadow
    algorithm: fixed_window
    limit: 1
    period: 1h
    shadow: true
`

const envoyYAML = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: hour
      requests_per_unit: 1
`

func loadConfig(t *testing.T) *config.Config {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"policies.yaml": policiesYAML, "envoy.yaml": envoyYAML} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "policies.yaml"), filepath.Join(dir, "envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// traced is a Service on store whose spans go to an in-process recorder.
func traced(t *testing.T, store sluice.Store, keys bool) (*service.Service, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return service.New(store, loadConfig(t), service.WithLogger(quiet), service.WithTracing(tp, keys)), rec
}

// check posts body to /v1/check on srv with traceparent, and returns the status.
func check(t *testing.T, srv *httptest.Server, body string) int {
	t.Helper()
	req, err := http.NewRequest("POST", srv.URL+"/v1/check", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("traceparent", traceparent)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func wantAttr(t *testing.T, s sdktrace.ReadOnlySpan, key attribute.Key, want any) {
	t.Helper()
	v, ok := attr(s, key)
	if !ok {
		t.Errorf("span %q: no %s; attributes %v", s.Name(), key, s.Attributes())
		return
	}
	var got any
	switch v.Type() {
	case attribute.STRINGSLICE:
		got = strings.Join(v.AsStringSlice(), ",")
	default:
		got = v.AsInterface()
	}
	if got != want {
		t.Errorf("span %q: %s = %v, want %v", s.Name(), key, got, want)
	}
}

// byName splits spans into the front end's (one, named name) and the store's.
func byName(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) (front sdktrace.ReadOnlySpan, store []sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range spans {
		switch {
		case s.Name() == name && front == nil:
			front = s
		case strings.HasPrefix(s.Name(), "sluice.store/"):
			store = append(store, s)
		default:
			t.Errorf("unexpected span %q", s.Name())
		}
	}
	if front == nil {
		t.Fatalf("no span %q among %d", name, len(spans))
	}
	return front, store
}

// wantChildOfClient: span continues the client's trace, as its traceparent asked.
func wantChildOfClient(t *testing.T, s sdktrace.ReadOnlySpan) {
	t.Helper()
	if got := s.SpanContext().TraceID().String(); got != parentTrace {
		t.Errorf("span %q: trace %s, want the client's %s", s.Name(), got, parentTrace)
	}
	if got := s.Parent().SpanID().String(); got != parentSpan || !s.Parent().IsRemote() {
		t.Errorf("span %q: parent %s (remote %v), want the client's %s", s.Name(), got, s.Parent().IsRemote(), parentSpan)
	}
	if s.SpanKind() != trace.SpanKindServer {
		t.Errorf("span %q: kind %v, want server", s.Name(), s.SpanKind())
	}
}

func wantChildOf(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("span %q is not a child of %q", child.Name(), parent.Name())
	}
}

// noKeys: no attribute of any span holds key.
func noKeys(t *testing.T, spans []sdktrace.ReadOnlySpan, key string) {
	t.Helper()
	for _, s := range spans {
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), key) {
				t.Errorf("span %q: %s holds the key %q, which was not asked for", s.Name(), kv.Key, key)
			}
		}
	}
}

func TestHTTPCheckSpans(t *testing.T) {
	svc, rec := traced(t, memory.New(), false)
	srv := httptest.NewServer(httpapi.New(svc))
	defer srv.Close()
	body := `{"checks":[{"policy":"per_user","key":"` + secretKey + `"},{"policy":"per_user_shadow","key":"` + secretKey + `"}]}`
	for i, want := range []struct {
		status  int
		outcome string
		allowed bool
	}{
		{200, tracing.OutcomeAllowed, true},
		{200, tracing.OutcomeShadow, true}, // the shadow policy's limit is 1
		{429, tracing.OutcomeDenied, false},
	} {
		rec.Reset()
		if got := check(t, srv, body); got != want.status {
			t.Fatalf("check %d: status %d, want %d", i, got, want.status)
		}
		spans := rec.Ended()
		front, store := byName(t, spans, "POST /v1/check")
		wantChildOfClient(t, front)
		wantAttr(t, front, "http.response.status_code", int64(want.status))
		wantAttr(t, front, tracing.KeyPolicies, "per_user,per_user_shadow")
		wantAttr(t, front, tracing.KeyChecks, int64(2))
		wantAttr(t, front, tracing.KeyOutcome, want.outcome)
		wantAttr(t, front, tracing.KeyAllowed, want.allowed)
		if _, ok := attr(front, tracing.KeyDegraded); ok {
			t.Errorf("check %d: marked degraded on the memory store", i)
		}
		// The enforced policy, then the shadow one: a store call each.
		if len(store) != 2 {
			t.Fatalf("check %d: %d store spans, want 2", i, len(store))
		}
		for _, s := range store {
			wantChildOf(t, s, front)
			wantAttr(t, s, tracing.KeyChecks, int64(1))
		}
		noKeys(t, spans, secretKey)
	}
}

func TestHTTPCheckKeysWhenAsked(t *testing.T) {
	svc, rec := traced(t, memory.New(), true)
	srv := httptest.NewServer(httpapi.New(svc))
	defer srv.Close()
	if got := check(t, srv, `{"policy":"per_user","key":"`+secretKey+`"}`); got != 200 {
		t.Fatalf("status %d", got)
	}
	front, store := byName(t, rec.Ended(), "POST /v1/check")
	wantAttr(t, front, tracing.KeyKeys, secretKey)
	for _, s := range store {
		wantAttr(t, s, tracing.KeyKeys, secretKey)
	}
}

func TestHTTPBadRequestSpan(t *testing.T) {
	svc, rec := traced(t, memory.New(), false)
	srv := httptest.NewServer(httpapi.New(svc))
	defer srv.Close()
	if got := check(t, srv, `{"policy":"nope","key":"`+secretKey+`"}`); got != 404 {
		t.Fatalf("status %d, want 404", got)
	}
	front, store := byName(t, rec.Ended(), "POST /v1/check")
	wantAttr(t, front, "http.response.status_code", int64(404))
	if front.Status().Code == codes.Error || len(store) != 0 {
		t.Errorf("a client's mistake: status %v, %d store calls; want no error and no store call", front.Status(), len(store))
	}
}

// deadRedis returns a redis:// URL where nothing listens.
func deadRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "redis://" + addr
}

// TestDegradedSpans: with Redis down the fail policy decides, and both the
// request's span and the store's say so, and which policy it was.
func TestDegradedSpans(t *testing.T) {
	for _, c := range []struct {
		onError string
		status  int
		allowed bool
	}{{"local", 200, true}, {"open", 200, true}, {"closed", 503, false}} {
		t.Run(c.onError, func(t *testing.T) {
			store, closeStore, err := service.OpenStore(config.Store{URL: deadRedis(t), OnError: c.onError}, quiet)
			if err != nil {
				t.Fatal(err)
			}
			defer closeStore()
			svc, rec := traced(t, store, false)
			srv := httptest.NewServer(httpapi.New(svc))
			defer srv.Close()
			if got := check(t, srv, `{"policy":"per_user","key":"`+secretKey+`"}`); got != c.status {
				t.Fatalf("status %d, want %d", got, c.status)
			}
			spans := rec.Ended()
			front, store2 := byName(t, spans, "POST /v1/check")
			if len(store2) != 1 {
				t.Fatalf("%d store spans, want 1", len(store2))
			}
			for _, s := range []sdktrace.ReadOnlySpan{front, store2[0]} {
				wantAttr(t, s, tracing.KeyDegraded, true)
				wantAttr(t, s, tracing.KeyFailPolicy, c.onError)
				wantAttr(t, s, tracing.KeyAllowed, c.allowed)
			}
			if c.onError == "closed" {
				if front.Status().Code != codes.Error || store2[0].Status().Code != codes.Error {
					t.Errorf("failing closed: statuses %v, %v; want errors", front.Status(), store2[0].Status())
				}
				wantAttr(t, store2[0], tracing.KeyErrorType, "unavailable")
			}
			noKeys(t, spans, secretKey)
		})
	}
}

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
	svc, rec := traced(t, memory.New(), false)
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
	svc, rec := traced(t, memory.New(), false)
	client := rls(t, svc)
	if _, err := client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge"}); err == nil {
		t.Fatal("a request without descriptors was accepted")
	}
	front, _ := byName(t, rec.Ended(), envoyrls.ServiceName+"/ShouldRateLimit")
	wantAttr(t, front, "rpc.grpc.status_code", int64(3)) // InvalidArgument
	wantAttr(t, front, tracing.KeyErrorType, "InvalidArgument")
	if front.Status().Code != codes.Error {
		t.Errorf("status %v, want an error", front.Status())
	}
	if front.Parent().IsValid() {
		t.Errorf("no traceparent was sent, yet the span has parent %v", front.Parent().SpanID())
	}
}

// TestOff: without a tracer provider nothing is wrapped: the front ends and
// the store are exactly what they are without tracing.
func TestOff(t *testing.T) {
	store := memory.New()
	svc := service.New(store, loadConfig(t), service.WithLogger(quiet))
	if svc.Tracer() != nil {
		t.Fatal("tracing is on by default")
	}
	if svc.TracedStore() != sluice.Store(store) {
		t.Errorf("the store is wrapped with tracing off")
	}
	var tr *tracing.Tracer
	h := http.NewServeMux()
	if got := tr.HTTP("POST", "/v1/check", h); got != http.Handler(h) {
		t.Errorf("a nil tracer wrapped the handler")
	}
}
