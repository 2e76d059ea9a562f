package rlqs

import (
	"fmt"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/storetest"
)

func refused(n *node, reason string) float64 {
	return testutil.ToFloat64(n.srv.metrics.refused.WithLabelValues(reason))
}

// waitStrategy waits for e's active assignment on id and returns its
// strategy.
func waitStrategy(t *testing.T, e *envoy, id map[string]string) *typev3.RateLimitStrategy {
	t.Helper()
	testwait.Until(t, fmt.Sprintf("an assignment for %v", id), func() bool { return e.strategy(id) != nil })
	return e.strategy(id)
}

// TestBucketAnswers: what each kind of bucket id is assigned.
func TestBucketAnswers(t *testing.T) {
	n := startNode(t, storetest.NewClock(time.Unix(1e9, 0)))
	e := dial(t, n, "edge")
	for _, c := range []struct {
		id   map[string]string
		want string
	}{
		{map[string]string{"policy": "api", "key": "k"}, "1000/SECOND"},
		{map[string]string{"policy": "nope", "key": "k"}, "DENY_ALL"},                       // unknown policy
		{map[string]string{"tenant": "acme"}, "100/SECOND"},                                 // the domain's tree
		{map[string]string{"path": "/upload", "tenant": "acme"}, "60/MINUTE"},               // unordered, put in the tree's order
		{map[string]string{"tenant": "acme", "path": "/health"}, "ALLOW_ALL"},               // an unlimited node
		{map[string]string{"tenant": "acme", "path": "/banned"}, "DENY_ALL"},                // requests_per_unit: 0
		{map[string]string{"free": "yes"}, "ALLOW_ALL"},                                     // no limit
		{map[string]string{"other": "x"}, "ALLOW_ALL"},                                      // matches no descriptor
		{map[string]string{"policy": "slow", "key": "k"}, "token_bucket 10/10s max 20"},     // a period no unit names, a burst
		{map[string]string{"policy": "api", "key": "k", "extra": "x"}, "ALLOW_ALL"},         // not native: the tree has no policy key
		{map[string]string{"tenant": "acme", "path": "/upload", "x": "y"}, "ALLOW_ALL"},     // an entry the tree has no place for
		{map[string]string{"policy": "api", "key": "p", "plan": "none"}, "1000/SECOND"},     // a plan the policy lacks: its own limit
		{map[string]string{"policy": "api", "key": string(make([]byte, 5000))}, "DENY_ALL"}, // too large to track
	} {
		answered(t, e, func() { e.start(c.id, 1) })
		if got := describe(waitStrategy(t, e, c.id)); got != c.want {
			t.Errorf("bucket %v: assigned %s, want %s", c.id, got, c.want)
		}
	}
	if got := refused(n, reasonUnknownPolicy); got != 1 {
		t.Errorf("refused %v for an unknown policy, want 1", got)
	}
}

// describe writes a strategy short.
func describe(s *typev3.RateLimitStrategy) string {
	switch st := s.GetStrategy().(type) {
	case *typev3.RateLimitStrategy_BlanketRule_:
		return st.BlanketRule.String()
	case *typev3.RateLimitStrategy_RequestsPerTimeUnit_:
		return fmt.Sprintf("%d/%s", st.RequestsPerTimeUnit.GetRequestsPerTimeUnit(), st.RequestsPerTimeUnit.GetTimeUnit())
	case *typev3.RateLimitStrategy_TokenBucket:
		tb := st.TokenBucket
		return fmt.Sprintf("token_bucket %d/%v max %d", tb.GetTokensPerFill().GetValue(), tb.GetFillInterval().AsDuration(), tb.GetMaxTokens())
	}
	return "none"
}

// TestAbsurdReports: counts and durations beyond the bounds are refused
// and leave the demand as it was, so the shares do not move.
func TestAbsurdReports(t *testing.T) {
	n := startNode(t, storetest.NewClock(time.Unix(1e9, 0)))
	small, big := dial(t, n, "edge"), dial(t, n, "edge")
	id := apiBucket("k")
	converge(t, []*envoy{small, big}, id, []float64{100, 5000})
	waitShares(t, []*envoy{small, big}, id, []float64{100, 900}, 1000)
	for _, u := range []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
		{TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: 1 << 62},
		{TimeElapsed: durationpb.New(time.Second), NumRequestsDenied: MaxCount + 1},
		{TimeElapsed: durationpb.New(-time.Second), NumRequestsAllowed: 1e6},
		{TimeElapsed: durationpb.New(100 * 24 * time.Hour), NumRequestsAllowed: 1e6},
		{TimeElapsed: &durationpb.Duration{Seconds: 1, Nanos: -5}, NumRequestsAllowed: 1e6},
	} {
		u.BucketId = &rlqsv3.BucketId{Bucket: id}
		answered(t, small, func() { small.send(u) })
	}
	waitShares(t, []*envoy{small, big}, id, []float64{100, 900}, 1000)
	if c, d := refused(n, reasonCount), refused(n, reasonDuration); c != 2 || d != 3 {
		t.Errorf("refused %v counts and %v durations, want 2 and 3", c, d)
	}
}

// TestBucketCap: a stream subscribes to at most WithMaxBuckets buckets; the
// others are denied, untracked.
func TestBucketCap(t *testing.T) {
	n := startNode(t, storetest.NewClock(time.Unix(1e9, 0)), WithMaxBuckets(3))
	e := dial(t, n, "edge")
	for i := range 5 {
		id := apiBucket(fmt.Sprint(i))
		answered(t, e, func() { e.start(id, 1) })
		want := "1000/SECOND"
		if i >= 3 {
			want = "DENY_ALL"
		}
		if got := describe(waitStrategy(t, e, id)); got != want {
			t.Errorf("bucket %d: %s, want %s", i, got, want)
		}
	}
	if got := refused(n, reasonTooManyBucket); got != 2 {
		t.Errorf("refused %v buckets, want 2", got)
	}
	if got := testutil.ToFloat64(n.srv.metrics.buckets); got != 3 {
		t.Errorf("%v buckets tracked, want 3", got)
	}
}

// rawStream opens a stream to n without an Envoy's manners.
func rawStream(t *testing.T, n *node) grpc.BidiStreamingClient[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse] {
	t.Helper()
	s, cancel := openStream(t, n)
	t.Cleanup(cancel)
	return s
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: %v, want %v", what, err, code)
	}
}

// TestBadStreams: a first message without a domain, a stream that never
// reports and one stream too many are refused with a status saying why.
func TestBadStreams(t *testing.T) {
	n := startNode(t, storetest.NewClock(time.Unix(1e9, 0)), WithMaxStreams(2), WithFirstReportTimeout(50*time.Millisecond))

	s := rawStream(t, n)
	if err := s.Send(&rlqsv3.RateLimitQuotaUsageReports{}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Recv()
	wantCode(t, "no domain", err, codes.InvalidArgument)

	_, err = rawStream(t, n).Recv()
	wantCode(t, "never reporting", err, codes.DeadlineExceeded)

	a, b := dial(t, n, "edge"), dial(t, n, "edge")
	answered(t, a, func() { a.start(apiBucket("k"), 1) })
	answered(t, b, func() { b.start(apiBucket("k"), 1) })
	_, err = rawStream(t, n).Recv()
	wantCode(t, "a third stream", err, codes.ResourceExhausted)
	for _, r := range []string{reasonNoDomain, reasonNoReport, reasonTooManyStream} {
		if got := refused(n, r); got != 1 {
			t.Errorf("refused %v for %s, want 1", got, r)
		}
	}
}

// TestShutdown: Shutdown ends the open streams and refuses new ones, both
// UNAVAILABLE, so that Envoy reconnects elsewhere.
func TestShutdown(t *testing.T) {
	n := startNode(t, storetest.NewClock(time.Unix(1e9, 0)))
	e := dial(t, n, "edge")
	answered(t, e, func() { e.start(apiBucket("k"), 1) })
	n.srv.Shutdown()
	<-e.done
	e.mu.Lock()
	err := e.err
	e.mu.Unlock()
	wantCode(t, "an open stream", err, codes.Unavailable)
	_, err = rawStream(t, n).Recv()
	wantCode(t, "a new stream", err, codes.Unavailable)
}
