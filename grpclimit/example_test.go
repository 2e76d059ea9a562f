package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Two calls a minute per API key (per peer address without one), on a gRPC
// server's unary calls and streams; a denied call fails with
// ResourceExhausted and says when to retry.
func Example() {
	store := memory.New()
	perKey, _ := sluice.New(store, sluice.Policy{Name: "per-key", Algorithm: sluice.GCRA, Limit: 2, Period: time.Minute})
	in, err := grpclimit.New(
		grpclimit.Limit(perKey, grpclimit.ByMetadata("x-api-key"), grpclimit.WithFallbackKey(grpclimit.ByPeer())),
	)
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(in.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(in.StreamServerInterceptor()),
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(ln)
	defer srv.Stop()

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "alice")
	for range 3 {
		var header metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		// retry-after: the seconds until a call is admitted (30 here, less
		// the time the calls took).
		fmt.Printf("%v, retry-after sent: %t\n", status.Code(err), len(header.Get("retry-after")) == 1)
	}
	// Output:
	// OK, retry-after sent: false
	// OK, retry-after sent: false
	// ResourceExhausted, retry-after sent: true
}
