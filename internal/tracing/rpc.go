package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// StartRPC starts the server span of a gRPC call to service/method, a child
// of the W3C traceparent in the call's metadata. End it with EndRPC.
func (t *Tracer) StartRPC(ctx context.Context, service, method string) (context.Context, trace.Span) {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = t.prop.Extract(ctx, metadataCarrier(md))
	}
	return t.tracer.Start(ctx, service+"/"+method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("rpc.system", "grpc"),
			attribute.String("rpc.service", service), attribute.String("rpc.method", method)))
}

// NoteRPC records on span what a rate limit call was about and what its
// client was told: allowed or not, whatever the decision inside said.
func NoteRPC(span trace.Span, domain string, descriptors int, allowed bool) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(KeyDomain.String(domain), KeyDescriptors.Int(descriptors), KeyAllowed.Bool(allowed))
	if !allowed {
		span.SetAttributes(KeyOutcome.String(OutcomeDenied))
	}
}

// EndRPC records the call's gRPC status on span, and ends it.
func EndRPC(span trace.Span, err error) {
	st, _ := status.FromError(err)
	span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(st.Code())))
	if err != nil {
		span.SetAttributes(KeyErrorType.String(st.Code().String()))
		span.SetStatus(codes.Error, st.Message())
	}
	span.End()
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
