package tracingtest

import (
	"context"
	"net"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Receiver is an OTLP trace receiver, as a collector runs one: it keeps
// every span it is sent.
type Receiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []ReceivedSpan
}

// ReceivedSpan is one span a Receiver was sent, with its resource's
// service.name.
type ReceivedSpan struct {
	Service string
	*tracepb.Span
}

// StartGRPC serves a Receiver over gRPC on 127.0.0.1 until tb ends, and
// returns it with its endpoint for OTEL_EXPORTER_OTLP_ENDPOINT.
func StartGRPC(tb testing.TB) (*Receiver, string) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r := &Receiver{}
	g := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(g, r)
	go func() { _ = g.Serve(ln) }()
	tb.Cleanup(g.Stop)
	return r, "http://" + ln.Addr().String()
}

// Export implements the collector's TraceService.
func (r *Receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	req = proto.Clone(req).(*coltracepb.ExportTraceServiceRequest)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, ReceivedSpan{Service: service, Span: s})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []ReceivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ReceivedSpan(nil), r.spans...)
}
