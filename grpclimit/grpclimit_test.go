package grpclimit_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const (
	checkMethod = "/grpc.health.v1.Health/Check"
	watchMethod = "/grpc.health.v1.Health/Watch"
)

func fakeStore() (*memory.Store, *storetest.Clock) {
	clock := storetest.NewClock(storetest.Epoch)
	return memory.New(memory.WithClock(clock)), clock
}

func newLimiter(t *testing.T, store sluice.Store, p sluice.Policy) *sluice.Limiter {
	t.Helper()
	l, err := sluice.New(store, p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// start serves the gRPC health service behind the interceptors on a real TCP
// listener on 127.0.0.1 and returns a client connected to it.
func start(t *testing.T, opts ...grpclimit.Option) healthpb.HealthClient {
	t.Helper()
	conn := serve(t, func(srv *grpc.Server) { healthpb.RegisterHealthServer(srv, health.NewServer()) }, opts...)
	return healthpb.NewHealthClient(conn)
}

// serve serves what register registers behind the interceptors on a real
// TCP listener on 127.0.0.1 and returns a client connection to it.
func serve(t *testing.T, register func(*grpc.Server), opts ...grpclimit.Option) *grpc.ClientConn {
	t.Helper()
	in, err := grpclimit.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(in.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(in.StreamServerInterceptor()),
	)
	register(srv)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

type outcome struct {
	err      error
	header   metadata.MD
	retry    time.Duration // RetryInfo, or -1 without one
	violated []string      // QuotaFailure subjects
}

// check calls Health.Check with the given request metadata.
func check(t *testing.T, c healthpb.HealthClient, md ...string) outcome {
	t.Helper()
	var o outcome
	ctx := metadata.AppendToOutgoingContext(context.Background(), md...)
	_, o.err = c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&o.header))
	o.details()
	return o
}

func (o *outcome) details() {
	o.retry = -1
	for _, d := range status.Convert(o.err).Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			o.retry = d.RetryDelay.AsDuration()
		case *errdetails.QuotaFailure:
			for _, v := range d.Violations {
				o.violated = append(o.violated, v.Subject)
			}
		}
	}
}

// fields parses a rate-limit metadata value as a Structured Field List and
// returns name → parameters.
func fields(t *testing.T, md metadata.MD, key string) map[string]map[string]int64 {
	t.Helper()
	list, err := httpsfv.UnmarshalList(md.Get(key))
	if err != nil || len(list) == 0 {
		t.Fatalf("%s: %q: %v", key, md.Get(key), err)
	}
	out := map[string]map[string]int64{}
	for _, m := range list {
		item := m.(httpsfv.Item)
		params := map[string]int64{}
		for _, k := range item.Params.Names() {
			v, _ := item.Params.Get(k)
			params[k] = v.(int64)
		}
		out[item.Value.(string)] = params
	}
	return out
}

func peek(t *testing.T, l *sluice.Limiter, key string) int64 {
	t.Helper()
	res, err := l.AllowN(context.Background(), key, 0)
	if err != nil {
		t.Fatal(err)
	}
	return res.Remaining
}

func TestUnaryLimits(t *testing.T) {
	store, clock := fakeStore()
	// One unit a second per client, burst 2; 100 a minute for everyone.
	perClient := newLimiter(t, store, sluice.Policy{Name: "per-client", Algorithm: sluice.GCRA, Limit: 2, Period: 2 * time.Second})
	global := newLimiter(t, store, sluice.Policy{Name: "global", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Minute})
	c := start(t,
		grpclimit.Limit(perClient, grpclimit.ByMetadata("X-API-Key")),
		grpclimit.Limit(global, grpclimit.Global()),
	)
	for i := 1; i <= 2; i++ {
		o := check(t, c, "x-api-key", "alice")
		if o.err != nil {
			t.Fatalf("call %d: %v", i, o.err)
		}
		pol := fields(t, o.header, "ratelimit-policy")
		if pol["per-client"]["q"] != 2 || pol["per-client"]["w"] != 2 || pol["global"]["q"] != 100 || pol["global"]["w"] != 60 {
			t.Fatalf("call %d: ratelimit-policy %v", i, pol)
		}
		rl := fields(t, o.header, "ratelimit")
		if rl["per-client"]["r"] != int64(2-i) || rl["per-client"]["t"] != int64(i) || rl["global"]["r"] != int64(100-i) {
			t.Fatalf("call %d: ratelimit %v", i, rl)
		}
		if o.header.Get("retry-after") != nil {
			t.Fatalf("call %d: retry-after on an allowed call", i)
		}
	}
	o := check(t, c, "x-api-key", "alice")
	if status.Code(o.err) != codes.ResourceExhausted {
		t.Fatalf("third call: %v, want ResourceExhausted", o.err)
	}
	if o.retry != time.Second || len(o.violated) != 1 || o.violated[0] != "policy:per-client" {
		t.Fatalf("third call: RetryInfo %v, QuotaFailure %v", o.retry, o.violated)
	}
	// The rate-limit metadata of a denial comes in the response header too.
	if ra := o.header.Get("retry-after"); len(ra) != 1 || ra[0] != "1" {
		t.Fatalf("retry-after %q, want 1", ra)
	}
	if rl := fields(t, o.header, "ratelimit"); rl["per-client"]["r"] != 0 || rl["global"]["r"] != 98 {
		t.Fatalf("ratelimit %v", rl)
	}
	clock.Advance(o.retry)
	if o := check(t, c, "x-api-key", "alice"); o.err != nil {
		t.Fatalf("after waiting the RetryInfo delay: %v", o.err)
	}
	// No key: the per-client limit does not apply.
	o = check(t, c)
	if o.err != nil || len(fields(t, o.header, "ratelimit-policy")) != 1 {
		t.Fatalf("anonymous call: %v, %v", o.err, o.header)
	}
}

// RetryInfo is rounded up to the millisecond, never down, and waiting it is
// enough.
func TestRetryInfoRoundsUp(t *testing.T) {
	store, clock := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 3, Period: time.Second})
	c := start(t, grpclimit.Limit(lim, grpclimit.ByPeer()))
	for range 3 {
		check(t, c)
	}
	o := check(t, c)
	// The exact wait is one emission interval, 333,334 µs.
	if status.Code(o.err) != codes.ResourceExhausted || o.retry != 334*time.Millisecond {
		t.Fatalf("%v, RetryInfo %v, want 334ms", o.err, o.retry)
	}
	clock.Advance(333 * time.Millisecond)
	if o := check(t, c); o.err == nil {
		t.Fatal("admitted before the exact wait")
	}
	clock.Advance(time.Millisecond)
	if o := check(t, c); o.err != nil {
		t.Fatalf("after the RetryInfo delay: %v", o.err)
	}
	if peek(t, lim, "127.0.0.1") != 0 {
		t.Fatal("ByPeer did not key by 127.0.0.1")
	}
}

func TestStreamLimitedOnCreation(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "streams", Algorithm: sluice.FixedWindow, Limit: 1, Period: 30 * time.Second})
	c := start(t, grpclimit.Limit(lim, grpclimit.ByMethod()))
	watch := func() outcome {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var o outcome
		s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			var res *healthpb.HealthCheckResponse
			if res, err = s.Recv(); err == nil && res.Status != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("Watch: %v", res.Status)
			}
			o.header, _ = s.Header()
		}
		o.err = err
		o.details()
		return o
	}
	o := watch()
	if o.err != nil {
		t.Fatalf("first stream: %v", o.err)
	}
	if rl := fields(t, o.header, "ratelimit"); rl["streams"]["r"] != 0 || rl["streams"]["t"] != 30 {
		t.Fatalf("first stream: ratelimit %v", rl)
	}
	o = watch()
	if status.Code(o.err) != codes.ResourceExhausted || o.retry != 30*time.Second {
		t.Fatalf("second stream: %v, RetryInfo %v", o.err, o.retry)
	}
	if ra := o.header.Get("retry-after"); len(ra) != 1 || ra[0] != "30" {
		t.Fatalf("second stream: retry-after %q", ra)
	}
	// Keyed by method: unary Check has its own bucket.
	if o := check(t, c); o.err != nil {
		t.Fatalf("Check: %v", o.err)
	}
	if peek(t, lim, watchMethod) != 0 || peek(t, lim, checkMethod) != 0 {
		t.Fatal("the full method names were not the keys")
	}
}

// A call denied by the global limit consumes nothing on the per-client one.
func TestAllOrNothing(t *testing.T) {
	store, _ := fakeStore()
	perClient := newLimiter(t, store, sluice.Policy{Name: "per-client", Algorithm: sluice.GCRA, Limit: 5, Period: time.Minute})
	global := newLimiter(t, store, sluice.Policy{Name: "global", Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Minute})
	c := start(t,
		grpclimit.Limit(perClient, grpclimit.Keys(grpclimit.ByMetadata("x-api-key"), grpclimit.ByPeer())),
		grpclimit.Limit(global, grpclimit.Global()),
	)
	check(t, c, "x-api-key", "alice")
	check(t, c, "x-api-key", "alice")
	o := check(t, c, "x-api-key", "bob")
	if status.Code(o.err) != codes.ResourceExhausted || len(o.violated) != 1 || o.violated[0] != "policy:global" {
		t.Fatalf("bob: %v, violated %v", o.err, o.violated)
	}
	if n := peek(t, perClient, "bob|127.0.0.1"); n != 5 {
		t.Fatalf("bob has %d of 5 left, want 5", n)
	}
	if n := peek(t, perClient, "alice|127.0.0.1"); n != 3 {
		t.Fatalf("alice has %d of 5 left, want 3", n)
	}
}

// Shadow limits never deny nor show; they are charged only for admitted
// calls, and reported when they would have denied.
func TestShadow(t *testing.T) {
	store, _ := fakeStore()
	enforced := newLimiter(t, store, sluice.Policy{Name: "enforced", Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Minute})
	tight := newLimiter(t, store, sluice.Policy{Name: "tight", Algorithm: sluice.GCRA, Limit: 1, Period: time.Minute})
	roomy := newLimiter(t, store, sluice.Policy{Name: "roomy", Algorithm: sluice.GCRA, Limit: 5, Period: time.Minute})
	var mu sync.Mutex
	var got []grpclimit.ShadowDenial
	c := start(t,
		grpclimit.Limit(enforced, grpclimit.Global()),
		grpclimit.Limit(tight, grpclimit.ByPeer(), grpclimit.WithShadow()),
		grpclimit.Limit(roomy, grpclimit.ByPeer(), grpclimit.WithShadow()),
		grpclimit.WithShadowDenialHandler(func(_ context.Context, method string, d grpclimit.ShadowDenial) {
			mu.Lock()
			defer mu.Unlock()
			if method != checkMethod {
				t.Errorf("method %q", method)
			}
			got = append(got, d)
		}))
	for i := range 2 {
		o := check(t, c)
		if o.err != nil {
			t.Fatalf("call %d: %v: shadow limits never deny", i, o.err)
		}
		if pol := fields(t, o.header, "ratelimit-policy"); len(pol) != 1 {
			t.Fatalf("call %d: ratelimit-policy %v: shadow limits are not shown", i, pol)
		}
	}
	if o := check(t, c); status.Code(o.err) != codes.ResourceExhausted {
		t.Fatalf("third call: %v, want the enforced limit to deny", o.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].Policy.Name != "tight" || got[0].Result.Allowed || got[0].Result.RetryAfter != time.Minute || got[0].Denied ||
		got[1].Policy.Name != "tight" || !got[1].Denied {
		t.Fatalf("reported %+v, want tight on the second call, then denied anyway on the third", got)
	}
	if n := peek(t, roomy, "127.0.0.1"); n != 3 {
		t.Fatalf("roomy has %d of 5 left, want 3: charged for admitted calls only", n)
	}
}

// syncBuffer is a log the goroutines under test and the test share.
type syncBuffer = testlog.Buffer

// failingStore is a sluice.Store whose every decision fails, as a store does
// when Redis is unreachable.
type failingStore struct{ err error }

func (s failingStore) Decide(context.Context, sluice.Request) (sluice.Result, error) {
	return sluice.Result{}, s.err
}
func (s failingStore) DecideAll(context.Context, []sluice.Request, []sluice.Result) error {
	return s.err
}

func TestStoreError(t *testing.T) {
	boom := errors.New("redis: connection refused")
	lim := newLimiter(t, failingStore{boom}, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second})
	var log syncBuffer
	if o := check(t, start(t, grpclimit.Limit(lim, grpclimit.Global()), grpclimit.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))); status.Code(o.err) != codes.Unavailable {
		t.Fatalf("default: %v, want Unavailable", o.err)
	}
	if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), "connection refused") {
		t.Fatalf("log %q does not report the error", log.String())
	}
	c := start(t, grpclimit.Limit(lim, grpclimit.Global()),
		grpclimit.WithErrorHandler(func(_ context.Context, _ string, err error) error {
			if !errors.Is(err, boom) {
				t.Errorf("%v does not wrap the store's error", err)
			}
			return nil // fail open
		}))
	if o := check(t, c); o.err != nil {
		t.Fatalf("fail open: %v", o.err)
	}
}

func TestNoMetadataWhenAllowedAndCost(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Minute})
	c := start(t, grpclimit.Limit(lim, grpclimit.Global()), grpclimit.WithMetadataOnDenialOnly(),
		grpclimit.WithLogger(slog.New(slog.DiscardHandler)),
		grpclimit.WithCost(func(ctx context.Context, method string) int64 {
			n, _ := strconv.ParseInt(metadata.ValueFromIncomingContext(ctx, "cost")[0], 10, 64)
			return n
		}))
	if o := check(t, c, "cost", "4"); o.err != nil || o.header.Get("ratelimit") != nil {
		t.Fatalf("%v %v", o.err, o.header)
	}
	o := check(t, c, "cost", "2")
	if status.Code(o.err) != codes.ResourceExhausted {
		t.Fatalf("%v", o.err)
	}
	if rl := fields(t, o.header, "ratelimit"); rl["p"]["r"] != 1 {
		t.Fatalf("ratelimit %v", rl)
	}
	if o := check(t, c, "cost", "9"); status.Code(o.err) != codes.ResourceExhausted || o.retry != -1 {
		t.Fatalf("cost above capacity: %v, RetryInfo %v: want no RetryInfo", o.err, o.retry)
	}
}

// A leaky bucket of 50 a second holds simultaneous calls so that they
// complete 20 ms apart. The store's clock stands still, so the Delays are
// exactly 0, 20, …, 80 ms however slowly the calls arrive; the waits are
// real. Call k, decided after the burst began, cannot complete before
// k·20 ms (a timer cannot fire early); later depends on how busy the machine
// is, so that side is bounded only generously.
func TestLeakyBucketShapesCalls(t *testing.T) {
	const spacing = 20 * time.Millisecond
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "shaper", Algorithm: sluice.LeakyBucket, Limit: 50, Period: time.Second, Burst: 10})
	c := start(t, grpclimit.Limit(lim, grpclimit.Global()))
	check(t, c) // connect first; this call takes the bucket's first slot
	var mu sync.Mutex
	var done []time.Duration
	var wg sync.WaitGroup
	begin := time.Now()
	for range 5 {
		wg.Go(func() {
			_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			done = append(done, time.Since(begin))
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(done)
	for k, d := range done {
		// The connecting call had Delay 0, so these wait (k+1)·20 ms.
		if min := time.Duration(k+1) * spacing; d < min {
			t.Fatalf("completions %v: %d before %v", done, k, min)
		}
		if limit := time.Duration(k+1)*spacing + 10*time.Second; d > limit {
			t.Fatalf("completions %v: %d after %v", done, k, limit)
		}
	}
}

func TestNewRejectsBadConfigurations(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second})
	for name, opts := range map[string][]grpclimit.Option{
		"no limits":         nil,
		"nil limiter":       {grpclimit.Limit(nil, grpclimit.Global())},
		"zero key":          {grpclimit.Limit(lim, grpclimit.Key{})},
		"zero part":         {grpclimit.Limit(lim, grpclimit.Keys(grpclimit.ByPeer(), grpclimit.Key{}))},
		"same policy twice": {grpclimit.Limit(lim, grpclimit.ByPeer()), grpclimit.Limit(lim, grpclimit.Global())},
		"IPv6 prefix 129":   {grpclimit.Limit(lim, grpclimit.ByPeer()), grpclimit.WithIPv6Prefix(129)},
		"negative max wait": {grpclimit.Limit(lim, grpclimit.ByPeer()), grpclimit.WithMaxDelay(-1)},
	} {
		if _, err := grpclimit.New(opts...); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}
