package httpapi_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/tracing/tracingtest"
)

type checkBenchVariant struct {
	name string
	opts []service.Option
}

// checkBenchVariants are tracing off (the default) and on, every span
// sampled and exported in batches to an in-process exporter.
func checkBenchVariants(b *testing.B) []checkBenchVariant {
	quiet := service.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	tp, _ := tracingtest.Provider(b)
	return []checkBenchVariant{{"off", []service.Option{quiet}}, {"traced", []service.Option{quiet, service.WithTracing(tp, false)}}}
}
