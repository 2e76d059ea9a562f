package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
)

// drainer is the shutdown serve and proxy share: a drain reporting not
// ready, then a stop letting in-flight requests finish.
type drainer struct {
	log       *slog.Logger
	draining  atomic.Bool   // set on shutdown: readiness says no
	endDrain  chan struct{} // closed to end the drain early
	endedOnce sync.Once
}

func newDrainer(log *slog.Logger) *drainer {
	return &drainer{log: log, endDrain: make(chan struct{})}
}

// drain reports not ready — /readyz 503, and whatever notReady turns off
// (serve's gRPC health: NOT_SERVING) — for d while every request is still
// served, so that load balancers and Envoy's health checks move traffic
// away before the listeners close. A second SIGTERM or SIGINT, or
// endDrainNow, ends it early.
func (s *drainer) drain(d time.Duration, notReady func()) {
	if d <= 0 {
		s.draining.Store(true)
		notReady()
		return
	}
	// Listening before readiness turns means that whoever sees "draining"
	// can end it with a signal instead of killing the process.
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	s.draining.Store(true)
	notReady()
	s.log.Info("draining: reporting not ready while still serving", "drain", d)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-again:
		s.log.Info("second signal: ending the drain")
	case <-s.endDrain:
	}
}

// endDrainNow ends the drain early, as a second signal does.
func (s *drainer) endDrainNow() { s.endedOnce.Do(func() { close(s.endDrain) }) }

// stop closes every listener at once (grpcSrv may be nil) and lets
// in-flight requests finish within timeout; past it, the remaining
// connections are closed.
func (s *drainer) stop(timeout time.Duration, grpcSrv *grpc.Server, httpSrvs ...*http.Server) {
	s.log.Info("shutting down: no new connections, finishing in-flight requests", "timeout", timeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, httpSrv := range httpSrvs {
		wg.Go(func() {
			if err := httpSrv.Shutdown(ctx); err != nil {
				s.log.Warn("HTTP requests still in flight at the shutdown timeout", "error", err)
				httpSrv.Close()
			}
		})
	}
	if grpcSrv != nil {
		wg.Go(func() {
			stopped := make(chan struct{})
			go func() { grpcSrv.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-ctx.Done():
				s.log.Warn("gRPC requests still in flight at the shutdown timeout")
				grpcSrv.Stop()
				<-stopped
			}
		})
	}
	wg.Wait()
}
