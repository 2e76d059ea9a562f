package main

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/internal/connlimit"
)

// BenchmarkGRPCConnLimits measures what the connection limits add to a
// unary RPC: the capped listener (its per-read bookkeeping) and the stream
// tap (a deadline per RPC without one of its own), against a plain listener
// and no tap, on a trivial handler (gRPC health) so that the difference
// shows; with the client's deadline, as Envoy sends one, and without.
//
//	go test ./cmd/sluice -run '^$' -bench GRPCConnLimits -count 6
func BenchmarkGRPCConnLimits(b *testing.B) {
	for _, tc := range []struct {
		name              string
		limited, deadline bool
	}{{"plain/deadline", false, true}, {"limited/deadline", true, true}, {"plain/none", false, false}, {"limited/none", true, false}} {
		limited := tc.limited
		b.Run(tc.name, func(b *testing.B) {
			l := defaultConnLimits()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			var opts []grpc.ServerOption
			serveLn := ln
			if limited {
				opts = append(opts, grpc.InTapHandle(l.tapStream))
				serveLn = connlimit.New(ln, l.grpcMaxConns, connlimit.WithPerAddress(l.grpcMaxConnsPerIP),
					connlimit.WithReserve(healthReserve, healthReserveLife))
			}
			srv := grpc.NewServer(opts...)
			healthpb.RegisterHealthServer(srv, health.NewServer())
			go srv.Serve(serveLn)
			defer srv.Stop()
			conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			client := healthpb.NewHealthClient(conn)
			ctx := context.Background()
			if tc.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 10*time.Second) // sent as grpc-timeout, as Envoy sends its own
				defer cancel()
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
