package service

import (
	"io"
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/internal/tracing/tracingtest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type benchVariant struct {
	name   string
	tracer *tracing.Tracer // nil: off
}

// benchVariants are tracing off (the default) and on, every span sampled
// and exported in batches to an in-process exporter.
func benchVariants(b *testing.B) []benchVariant {
	tp, _ := tracingtest.Provider(b)
	return []benchVariant{{"off", nil}, {"traced", tracing.New(tp, false)}}
}
