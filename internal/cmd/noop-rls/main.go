// Command noop-rls is an Envoy rate limit (RLS v3) server that answers OK at
// once without deciding anything: the floor that `sluice bench` measures RLS
// servers against, since no server can be faster than gRPC itself on the same
// machine (docs/benchmarks.md, scripts/bench-service.sh).
//
//	go run ./internal/cmd/noop-rls --addr 127.0.0.1:18081
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

type noop struct{}

var ok = &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}

func (noop) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return ok, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:18081", "listen `address`")
	workers := flag.Int("grpc-stream-workers", runtime.GOMAXPROCS(0), "as sluice serve's flag of the same name (0: one goroutine per call)")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "noop-rls:", err)
		os.Exit(1)
	}
	var opts []grpc.ServerOption
	if *workers > 0 {
		opts = append(opts, grpc.NumStreamWorkers(uint32(*workers)))
	}
	g := grpc.NewServer(opts...)
	rlsv3.RegisterRateLimitServiceServer(g, noop{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		g.Stop()
	}()
	if err := g.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "noop-rls:", err)
		os.Exit(1)
	}
}
