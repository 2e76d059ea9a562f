package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// StartRateLimit starts the server span of a call to Envoy's rate limit
// service (service/method) for domain with n descriptors, a child of the W3C
// traceparent in the call's metadata. Its outcome is allowed unless the
// decision inside says otherwise. End it with EndRateLimit.
func (t *Tracer) StartRateLimit(ctx context.Context, service, method, domain string, n int) (context.Context, trace.Span) {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = t.prop.Extract(ctx, metadataCarrier(md))
	}
	return t.tracer.Start(ctx, service+"/"+method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("rpc.system", "grpc"),
			attribute.String("rpc.service", service), attribute.String("rpc.method", method),
			KeyDomain.String(domain), KeyDescriptors.Int(n), KeyOutcome.String(OutcomeAllowed)))
}

// EndRateLimit records what the client was told — allowed or not, whatever
// the decision inside said, and the gRPC status — and ends span.
func EndRateLimit(span trace.Span, allowed bool, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	st, _ := status.FromError(err)
	code := attribute.Int("rpc.grpc.status_code", int(st.Code()))
	switch {
	case err != nil:
		span.SetAttributes(code, KeyOutcome.String(OutcomeError))
	case allowed:
		span.SetAttributes(code, KeyAllowed.Bool(true))
	default:
		span.SetAttributes(code, KeyAllowed.Bool(false), KeyOutcome.String(OutcomeDenied))
	}
	if err != nil {
		span.SetAttributes(KeyErrorType.String(st.Code().String()))
		span.SetStatus(codes.Error, st.Message())
	}
}

// metadataCarrier reads W3C trace context from gRPC metadata, whose keys
// are lower case, as the propagator asks for them.
type metadataCarrier metadata.MD

func (c metadataCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c metadataCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
