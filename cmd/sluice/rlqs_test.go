package main

import (
	"context"
	"strings"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestServeRLQS: serve's gRPC port serves Envoy's rate limit quota service
// beside the rate limit service, on the configuration's native policies: two
// Envoys offering 100 and 2000 requests a second on a limit of 1000 a
// second are assigned 100 and 900. The streams outlive --grpc-rpc-timeout,
// which bounds the other RPCs, and end when the server shuts down, without
// holding the shutdown up until its timeout.
func TestServeRLQS(t *testing.T) {
	const rpcTimeout = 100 * time.Millisecond
	var (
		s    *served
		conn *grpc.ClientConn
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(func() { // after the shutdown: the streams were open during it
		cancel()
		if conn != nil {
			conn.Close()
		}
		if strings.Contains(s.logs.String(), "still in flight") {
			t.Errorf("the quota streams held the shutdown up to its timeout:\n%s", s.logs)
		}
	})
	s = startServe(t, "policies:\n  - name: api\n    algorithm: gcra\n    limit: 1000\n    period: 1s\n", func(ss *serveSetup) {
		l := defaultConnLimits()
		l.grpcRPCTimeout = rpcTimeout
		ss.opts.limits = &l
	})
	var err error
	conn, err = grpc.NewClient(s.srv.grpcAddr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	id := &rlqsv3.BucketId{Bucket: map[string]string{"policy": "api", "key": "acme"}}
	report := func(st rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient, domain string, rate uint64) uint64 {
		t.Helper()
		err := st.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			{BucketId: id, TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: rate}}})
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("answer: %v", err)
		}
		return m.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetRequestsPerTimeUnit().GetRequestsPerTimeUnit()
	}
	small, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	large, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	report(small, "edge", 100)
	report(large, "edge", 2000)
	// Not a wait for something to happen: the streams must still be open
	// after the RPC timeout has passed, however slow the machine.
	time.Sleep(3 * rpcTimeout)
	if got := report(large, "", 2000); got != 900 {
		t.Errorf("the large Envoy is assigned %d a second, want 900", got)
	}
	if got := report(small, "", 100); got != 100 {
		t.Errorf("the small Envoy is assigned %d a second, want 100", got)
	}
}
