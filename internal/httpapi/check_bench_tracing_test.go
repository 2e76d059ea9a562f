package httpapi_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/internal/tracing/tracingtest"
	"github.com/sluicehq/sluice/memory"
)

type checkBenchVariant struct {
	name   string
	tracer *tracing.Tracer // nil: off
}

// checkBenchVariants are tracing off (the default) and on, every span
// sampled and exported in batches to an in-process exporter.
func checkBenchVariants(b *testing.B) []checkBenchVariant {
	tp, _ := tracingtest.Provider(b)
	return []checkBenchVariant{{"off", nil}, {"traced", tracing.New(tp, false)}}
}

// benchService is a Service on the memory store, traced by v's tracer.
func benchService(cfg *config.Config, v checkBenchVariant) *service.Service {
	quiet := service.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	return service.New(storestack.Of(memory.New(), storestack.WithTracer(v.tracer)), cfg, quiet)
}
