package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/tracing/provider"
)

// tracingFlushTimeout bounds the export of the last spans at shutdown: a
// collector that is down must not hold the process.
const tracingFlushTimeout = 5 * time.Second

// startTracing sets up OpenTelemetry tracing from the OTEL_* environment
// variables: the Service option that turns it on (a no-op when it is off),
// and stop, which flushes the spans still buffered.
func startTracing(ctx context.Context, log *slog.Logger) (service.Option, func(), error) {
	tp, settings, err := provider.FromEnv(ctx, os.Getenv, buildVersion(), log)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	if tp == nil {
		return service.WithTracing(nil, false), func() {}, nil
	}
	log.Info("tracing on: exporting spans over OTLP", "protocol", settings.Protocol, "keys", settings.Keys)
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("tracing: the last spans were not all exported", "error", err)
		}
	}
	return service.WithTracing(tp, settings.Keys), stop, nil
}

// sequence returns a function calling each of fs in turn.
func sequence(fs ...func()) func() {
	return func() {
		for _, f := range fs {
			f()
		}
	}
}
