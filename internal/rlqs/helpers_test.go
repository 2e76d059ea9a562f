package rlqs

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// testPolicies are the native policies the tests assign: api, 1000 a
// second, and slow, 10 every 10 seconds in a bucket of 20.
const testPolicies = `policies:
  - name: api
    algorithm: gcra
    limit: 1000
    period: 1s
  - name: slow
    algorithm: token_bucket
    limit: 10
    period: 10s
    burst: 20
`

// testDomain is an envoyproxy/ratelimit-format domain: tenant, then path.
const testDomain = `domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 100}
    descriptors:
      - key: path
        value: /upload
        rate_limit: {unit: minute, requests_per_unit: 60}
      - key: path
        value: /health
      - key: path
        value: /banned
        rate_limit: {unit: second, requests_per_unit: 0}
  - key: free
    value: "yes"
`

// loadConfig loads the test configuration as sluice serve would.
func loadConfig(t testing.TB) *config.Config {
	t.Helper()
	dir := t.TempDir()
	native, envoy := filepath.Join(dir, "native.yaml"), filepath.Join(dir, "edge.yaml")
	for path, text := range map[string]string{native: testPolicies, envoy: testDomain} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(native, envoy)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// node is one Sluice node serving the rate limit quota service on
// loopback.
type node struct {
	srv  *Server
	svc  *service.Service
	addr string
}

// startNode starts a node with opts; its clock is clock.
func startNode(t *testing.T, clock *storetest.Clock, opts ...Option) *node {
	t.Helper()
	return startNodeOn(t, clock, storestack.Of(memory.New(memory.WithClock(clock))), opts...)
}

// startNodeOn is startNode on the store stack st, which it closes.
func startNodeOn(t *testing.T, clock *storetest.Clock, st *storestack.Stack, opts ...Option) *node {
	t.Helper()
	t.Cleanup(func() { st.Close() })
	svc := service.New(st, loadConfig(t))
	srv := New(svc, append([]Option{WithClock(clock)}, opts...)...)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return &node{srv: srv, svc: svc, addr: lis.Addr().String()}
}

// interval is the fake Envoys' report interval.
const interval = time.Second

// envoy behaves as Envoy's rate_limit_quota filter is documented to: the
// first request matched into a bucket is reported at once (subscribing),
// then the bucket's usage every report interval; until its first
// assignment a bucket allows everything (no_assignment_behavior's
// default); an assignment is active for its time to live on the Envoy's
// own clock, and then expired (expired_assignment_behavior unset: the
// bucket is abandoned); an AbandonAction forgets the bucket. Its traffic is
// a steady offered rate per bucket, so each interval's usage is exact.
type envoy struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]
	domain string
	clock  *storetest.Clock
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	buckets   map[string]*envoyBucket
	received  int
	abandoned int
	sentFirst bool
	err       error // what ended the stream
}

// envoyBucket is a bucket as the filter keeps it.
type envoyBucket struct {
	id      map[string]string
	rate    float64 // offered requests per second
	active  *rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction
	expires time.Time
	pushes  int // assignments received for it
}

// openStream opens a rate limit quota stream to n; cancel ends it.
func openStream(t *testing.T, n *node) (grpc.BidiStreamingClient[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse], context.CancelFunc) {
	t.Helper()
	conn, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return stream, cancel
}

// dial opens an Envoy's stream to n for domain.
func dial(t *testing.T, n *node, domain string) *envoy {
	t.Helper()
	stream, cancel := openStream(t, n)
	e := &envoy{t: t, stream: stream, domain: domain, clock: storetest.NewClock(time.Unix(1e9, 0)), cancel: cancel,
		done: make(chan struct{}), buckets: make(map[string]*envoyBucket)}
	go e.receive()
	t.Cleanup(e.close)
	return e
}

func (e *envoy) receive() {
	defer close(e.done)
	for {
		m, err := e.stream.Recv()
		if err != nil {
			e.mu.Lock()
			e.err = err
			e.mu.Unlock()
			return
		}
		e.mu.Lock()
		e.received++
		for _, a := range m.GetBucketAction() {
			b := e.buckets[bucketName(a.GetBucketId().GetBucket())]
			if b == nil {
				continue // not tracked (any more)
			}
			if a.GetAbandonAction() != nil {
				delete(e.buckets, bucketName(b.id))
				e.abandoned++
				continue
			}
			q := a.GetQuotaAssignmentAction()
			b.active, b.pushes = q, b.pushes+1
			b.expires = time.Time{}
			if ttl := q.GetAssignmentTimeToLive(); ttl != nil {
				b.expires = e.clock.Now().Add(ttl.AsDuration())
			}
		}
		e.mu.Unlock()
	}
}

// close ends the stream, as an Envoy shutting down does.
func (e *envoy) close() {
	e.cancel()
	<-e.done
}

// start makes the Envoy's traffic into bucket id rate requests a second:
// its first request is reported at once, subscribing.
func (e *envoy) start(id map[string]string, rate float64) {
	e.t.Helper()
	e.mu.Lock()
	e.buckets[bucketName(id)] = &envoyBucket{id: id, rate: rate}
	e.mu.Unlock()
	e.send(&rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqsv3.BucketId{Bucket: id}, NumRequestsAllowed: 1})
}

// setRate changes the offered rate into id.
func (e *envoy) setRate(id map[string]string, rate float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.buckets[bucketName(id)].rate = rate
}

// tick lets one report interval pass on the Envoy's clock and reports every
// bucket's usage over it: what its active assignment allowed of the offered
// rate, the rest denied; everything allowed without an active assignment.
func (e *envoy) tick() {
	e.t.Helper()
	e.mu.Lock()
	e.clock.Advance(interval)
	now := e.clock.Now()
	var usages []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage
	for name, b := range e.buckets {
		if b.active != nil && !b.expires.IsZero() && !now.Before(b.expires) {
			delete(e.buckets, name) // expired, with no expired_assignment_behavior: abandoned
			continue
		}
		offered := b.rate * interval.Seconds()
		allowed := offered
		if b.active != nil {
			allowed = min(offered, rateOf(b.active)*interval.Seconds())
		}
		usages = append(usages, &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId: &rlqsv3.BucketId{Bucket: b.id}, TimeElapsed: durationpb.New(interval),
			NumRequestsAllowed: uint64(allowed), NumRequestsDenied: uint64(offered - allowed)})
	}
	e.mu.Unlock()
	e.send(usages...)
}

// send sends one message of usages, the first with the domain.
func (e *envoy) send(usages ...*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage) {
	e.t.Helper()
	m := &rlqsv3.RateLimitQuotaUsageReports{BucketQuotaUsages: usages}
	e.mu.Lock()
	if !e.sentFirst {
		m.Domain, e.sentFirst = e.domain, true
	}
	e.mu.Unlock()
	if err := e.stream.Send(m); err != nil {
		e.t.Fatalf("sending a report: %v", err)
	}
}

// assigned is the rate (requests a second) of the active assignment of id,
// -1 without one.
func (e *envoy) assigned(id map[string]string) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := e.buckets[bucketName(id)]
	if b == nil || b.active == nil {
		return -1
	}
	return rateOf(b.active)
}

// strategy is id's active assignment's strategy, nil without one.
func (e *envoy) strategy(id map[string]string) *typev3.RateLimitStrategy {
	e.mu.Lock()
	defer e.mu.Unlock()
	if b := e.buckets[bucketName(id)]; b != nil && b.active != nil {
		return b.active.GetRateLimitStrategy()
	}
	return nil
}

// messages is how many responses the Envoy has received.
func (e *envoy) messages() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.received
}
