package main

import (
	"context"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/envoyrls"
)

// drain reports not ready — /readyz 503, gRPC health NOT_SERVING — for d
// while every request is still served, so that load balancers and Envoy's
// health checks move traffic away before the listeners close. A second
// SIGTERM or SIGINT, or endDrainNow, ends it early.
func (s *server) drain(d time.Duration, rls *envoyrls.Server) {
	if d <= 0 {
		s.draining.Store(true)
		rls.Shutdown()
		return
	}
	// Listening before readiness turns means that whoever sees "draining"
	// can end it with a signal instead of killing the process.
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	s.draining.Store(true)
	rls.Shutdown()
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
func (s *server) endDrainNow() { s.endedOnce.Do(func() { close(s.endDrain) }) }

// stop closes both listeners at once and lets in-flight requests finish
// within timeout; past it, the remaining connections are closed.
func (s *server) stop(timeout time.Duration, httpSrv *http.Server, grpcSrv *grpc.Server) {
	s.log.Info("shutting down: no new connections, finishing in-flight requests", "timeout", timeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := httpSrv.Shutdown(ctx); err != nil {
			s.log.Warn("HTTP requests still in flight at the shutdown timeout", "error", err)
			httpSrv.Close()
		}
	})
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
	wg.Wait()
}
