// Package tracingtest gives benchmarks tracing as `sluice serve` runs it —
// an SDK tracer provider sampling every span and exporting in batches — with
// an in-process exporter that counts the spans and keeps none.
package tracingtest

import (
	"context"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Counter is a span exporter that counts what it is given.
type Counter struct{ spans atomic.Int64 }

// ExportSpans implements sdktrace.SpanExporter.
func (c *Counter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	c.spans.Add(int64(len(spans)))
	return nil
}

// Shutdown implements sdktrace.SpanExporter.
func (c *Counter) Shutdown(context.Context) error { return nil }

// Spans returns how many spans were exported.
func (c *Counter) Spans() int64 { return c.spans.Load() }

// Provider returns a tracer provider that samples every span and exports
// them in batches to the returned Counter; it is shut down (flushed) when tb
// ends, before the cleanups registered earlier.
func Provider(tb testing.TB) (*sdktrace.TracerProvider, *Counter) {
	c := &Counter{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(c), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, c
}
