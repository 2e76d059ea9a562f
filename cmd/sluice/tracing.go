package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/internal/tracing/provider"
)

// tracingFlushTimeout bounds the export of the last spans at shutdown: a
// collector that is down must not hold the process.
const tracingFlushTimeout = 5 * time.Second

// startTracing sets up OpenTelemetry tracing from the OTEL_* environment
// variables: the tracer of the store stack and the service (nil when
// tracing is off), and stop, which flushes the spans still buffered.
func startTracing(ctx context.Context, log *slog.Logger) (*tracing.Tracer, func(), error) {
	tp, settings, err := provider.FromEnv(ctx, os.Getenv, buildVersion(), log)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	if tp == nil {
		return nil, func() {}, nil
	}
	log.Info("tracing on: exporting spans over OTLP", "protocol", settings.Protocol, "keys", settings.Keys)
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("tracing: the last spans were not all exported", "error", err)
		}
	}
	return tracing.New(tp, settings.Keys), stop, nil
}
