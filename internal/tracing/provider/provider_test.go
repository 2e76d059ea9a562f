package provider

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/tracing/tracingtest"
)

func env(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

func TestReadOnlyWhenAsked(t *testing.T) {
	for _, c := range []struct {
		name     string
		vars     map[string]string
		on       bool
		protocol string
		keys     bool
	}{
		{"nothing set", nil, false, "", false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, "http/protobuf", false},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true, "http/protobuf", false},
		{"exporter otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, "http/protobuf", false},
		{"exporter none wins", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false, "", false},
		{"sdk disabled wins", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false, "", false},
		{"sdk not disabled", map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, true, "http/protobuf", false},
		{"grpc", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, "grpc", false},
		{"traces protocol wins", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, true, "http/protobuf", false},
		{"keys", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", EnvTraceKeys: "true"}, true, "http/protobuf", true},
		{"keys alone do not turn it on", map[string]string{EnvTraceKeys: "true"}, false, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Read(env(c.vars))
			if err != nil {
				t.Fatal(err)
			}
			if s.On != c.on || s.Protocol != c.protocol || s.Keys != c.keys {
				t.Errorf("got on %v protocol %q keys %v, want %v %q %v", s.On, s.Protocol, s.Keys, c.on, c.protocol, c.keys)
			}
			if s.On && s.Sampler == nil {
				t.Error("on without a sampler")
			}
		})
	}
}

func TestReadRefusesWhatItCannotHonour(t *testing.T) {
	on := func(k, v string) map[string]string { return map[string]string{"OTEL_TRACES_EXPORTER": "otlp", k: v} }
	for _, c := range []struct {
		vars map[string]string
		want string // the variable the error must name
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
		{map[string]string{"OTEL_SDK_DISABLED": "maybe"}, "OTEL_SDK_DISABLED"},
		{on("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"), "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{on("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "thrift"), "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{on("OTEL_TRACES_SAMPLER", "sometimes"), "OTEL_TRACES_SAMPLER"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"}, "OTEL_TRACES_SAMPLER_ARG"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"}, "OTEL_TRACES_SAMPLER_ARG"},
		{on(EnvTraceKeys, "yes please"), EnvTraceKeys},
	} {
		_, err := Read(env(c.vars))
		if err == nil || !strings.HasPrefix(err.Error(), c.want+"=") {
			t.Errorf("%v: error %v, want one naming %s", c.vars, err, c.want)
		}
	}
}

func TestSamplers(t *testing.T) {
	for name, want := range map[string]string{
		"":                         "ParentBased{root:AlwaysOnSampler",
		"always_off":               "AlwaysOffSampler",
		"traceidratio":             "TraceIDRatioBased{0.25}",
		"parentbased_traceidratio": "ParentBased{root:TraceIDRatioBased{0.25}",
	} {
		s, err := sampler(name, "0.25")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s.Description(), want) {
			t.Errorf("%q: %s, want %s…", name, s.Description(), want)
		}
	}
}

// export sets up tracing from the environment, ends one span, and shuts
// the provider down, which flushes it to the receiver.
func export(t *testing.T, vars map[string]string) {
	t.Helper()
	for k, v := range vars {
		t.Setenv(k, v) // the exporter reads its endpoint from the environment itself
	}
	ctx := context.Background()
	tp, s, err := FromEnv(ctx, func(k string) string { return vars[k] }, "v1.2.3", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil || tp == nil {
		t.Fatalf("FromEnv: %v, %v (settings %+v)", tp, err, s)
	}
	_, span := tp.Tracer("test").Start(ctx, "exported span")
	span.End()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown (flushing the span): %v", err)
	}
}

func wantReceived(t *testing.T, r *tracingtest.Receiver, service string) {
	t.Helper()
	spans := r.Spans()
	if len(spans) != 1 || spans[0].GetName() != "exported span" || spans[0].Service != service {
		t.Errorf("received %v, want one span \"exported span\" of service %q", spans, service)
	}
}

// TestExportOverGRPC: with OTEL_EXPORTER_OTLP_ENDPOINT and protocol grpc,
// spans reach an OTLP receiver over gRPC on loopback.
func TestExportOverGRPC(t *testing.T) {
	r, endpoint := tracingtest.StartGRPC(t)
	export(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
	})
	wantReceived(t, r, "sluice")
}

// TestExportOverHTTP: the default protocol, http/protobuf, to /v1/traces;
// OTEL_SERVICE_NAME names the service.
func TestExportOverHTTP(t *testing.T) {
	r := &tracingtest.Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &msg)
		}
		if err != nil || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("bad export: %s %s: %v", req.URL.Path, req.Header.Get("Content-Type"), err)
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		_, _ = r.Export(req.Context(), &msg)
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer srv.Close()
	export(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL,
		"OTEL_SERVICE_NAME":           "edge-limiter",
	})
	wantReceived(t, r, "edge-limiter")
}

// FuzzRead: whatever the environment holds, Read answers settings it can
// honour or an error naming the variable at fault; it never panics.
func FuzzRead(f *testing.F) {
	f.Add("otlp", "", "grpc", "traceidratio", "0.5", "true")
	f.Add("", "http://c:4318", "", "", "", "")
	f.Add("none", "", "http/json", "bogus", "2", "maybe")
	f.Add("OTLP", "x", "HTTP/PROTOBUF", "ParentBased_TraceIDRatio", " 0.1 ", "1")
	f.Fuzz(func(t *testing.T, exporter, endpoint, protocol, samplerName, samplerArg, keys string) {
		vars := map[string]string{"OTEL_TRACES_EXPORTER": exporter, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
			"OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_TRACES_SAMPLER": samplerName,
			"OTEL_TRACES_SAMPLER_ARG": samplerArg, EnvTraceKeys: keys}
		s, err := Read(env(vars))
		if err != nil {
			named := false
			for k := range vars {
				named = named || strings.HasPrefix(err.Error(), k+"=")
			}
			if !named {
				t.Fatalf("error %q names no variable", err)
			}
			return
		}
		if s.On && (s.Sampler == nil || (s.Protocol != "grpc" && s.Protocol != "http/protobuf")) {
			t.Fatalf("on with settings it cannot honour: %+v", s)
		}
		if !s.On && s.Keys {
			t.Fatalf("keys on with tracing off")
		}
	})
}
