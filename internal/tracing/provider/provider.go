// Package provider sets up OpenTelemetry tracing over OTLP from the standard
// OTEL_* environment variables, for `sluice serve`. It is apart from package
// tracing so that only the binary links the SDK and the exporters.
package provider

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// EnvTraceKeys is the environment variable that puts the rate limit keys on
// spans ("true"); they are made of request data, so they are left out by
// default.
const EnvTraceKeys = "SLUICE_TRACE_KEYS"

// Settings is what the environment asks of tracing.
type Settings struct {
	// On: export traces. Off unless OTEL_TRACES_EXPORTER is otlp, or it
	// is unset and an OTLP endpoint is.
	On bool
	// Protocol is the OTLP protocol: grpc or http/protobuf (the default).
	Protocol string
	// Sampler from OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG
	// (default parentbased_always_on).
	Sampler sdktrace.Sampler
	// Keys from SLUICE_TRACE_KEYS.
	Keys bool
}

// Read reads the settings from getenv (os.Getenv), refusing what it
// cannot honour with an error that names the variable.
func Read(getenv func(string) string) (Settings, error) {
	env := func(name string) string { return strings.TrimSpace(getenv(name)) }
	var s Settings
	if v := env("OTEL_SDK_DISABLED"); v != "" {
		disabled, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("OTEL_SDK_DISABLED=%q: want true or false", v)
		}
		if disabled {
			return s, nil
		}
	}
	switch exporter := strings.ToLower(env("OTEL_TRACES_EXPORTER")); exporter {
	case "":
		s.On = env("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	case "otlp":
		s.On = true
	case "none":
	default:
		return s, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: want otlp or none", exporter)
	}
	if !s.On {
		return s, nil
	}
	s.Protocol = strings.ToLower(env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	name := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	if s.Protocol == "" {
		s.Protocol, name = strings.ToLower(env("OTEL_EXPORTER_OTLP_PROTOCOL")), "OTEL_EXPORTER_OTLP_PROTOCOL"
	}
	switch s.Protocol {
	case "":
		s.Protocol = "http/protobuf" // the specification's default
	case "grpc", "http/protobuf":
	default:
		return s, fmt.Errorf("%s=%q: want grpc or http/protobuf", name, s.Protocol)
	}
	var err error
	if s.Sampler, err = sampler(env("OTEL_TRACES_SAMPLER"), env("OTEL_TRACES_SAMPLER_ARG")); err != nil {
		return s, err
	}
	if v := env(EnvTraceKeys); v != "" {
		if s.Keys, err = strconv.ParseBool(v); err != nil {
			return s, fmt.Errorf("%s=%q: want true or false", EnvTraceKeys, v)
		}
	}
	return s, nil
}

// sampler is the OpenTelemetry SDK's sampler named by OTEL_TRACES_SAMPLER.
// The SDK would log a bad value and sample everything; serve refuses it.
func sampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg)
		}
		return r, nil
	}
	switch strings.ToLower(name) {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(strings.ToLower(name), "parentbased_") {
			return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
		}
		return sdktrace.TraceIDRatioBased(r), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio, "+
		"parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
}

// FromEnv returns the tracer provider the environment (os.Getenv) asks for,
// exporting in batches over OTLP, or nil when tracing is off. The exporter
// reads its endpoint, headers, timeout, compression and certificates from
// the OTEL_EXPORTER_OTLP_* variables itself, and does not connect until it
// exports. Export failures are logged on log. Shut the provider down to
// flush the last spans.
func FromEnv(ctx context.Context, getenv func(string) string, version string, log *slog.Logger) (*sdktrace.TracerProvider, Settings, error) {
	s, err := Read(getenv)
	if err != nil || !s.On {
		return nil, s, err
	}
	var exp sdktrace.SpanExporter
	if s.Protocol == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, s, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES come last, so they win.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", "sluice"), attribute.String("service.version", version)),
		resource.WithFromEnv())
	if err != nil {
		return nil, s, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "error", err) }))
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(s.Sampler)), s, nil
}
