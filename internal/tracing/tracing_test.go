package tracing_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/memory"
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

// traced is a Service on the stack stack builds with its tracer, whose
// spans go to an in-process recorder.
func traced(t *testing.T, stack func(*tracing.Tracer) *storestack.Stack, keys bool) (*service.Service, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tracing.New(tp, keys)
	return service.New(stack(tr), loadConfig(t), service.WithLogger(quiet)), rec
}

// memoryStack is a memory store traced by tr.
func memoryStack(tr *tracing.Tracer) *storestack.Stack {
	return storestack.Of(memory.New(), storestack.WithTracer(tr))
}

// openStack returns the stack of st, opened as serve opens it, traced by
// the tracer it is given, and closed at cleanup.
func openStack(t *testing.T, st config.Store) func(*tracing.Tracer) *storestack.Stack {
	return func(tr *tracing.Tracer) *storestack.Stack {
		t.Helper()
		s, err := storestack.Open(st, storestack.WithLogger(quiet), storestack.WithTracer(tr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
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

// TestOff: without a tracer provider nothing is wrapped: the front ends and
// the store are exactly what they are without tracing.
func TestOff(t *testing.T) {
	store := memory.New()
	svc := service.New(storestack.Of(store), loadConfig(t), service.WithLogger(quiet))
	if svc.Tracer() != nil {
		t.Fatal("tracing is on by default")
	}
	if svc.Stack().Decider() != sluice.Store(store) {
		t.Errorf("the store is wrapped with tracing off")
	}
	var tr *tracing.Tracer
	h := http.NewServeMux()
	if got := tr.HTTP("POST", "/v1/check", h); got != http.Handler(h) {
		t.Errorf("a nil tracer wrapped the handler")
	}
}
