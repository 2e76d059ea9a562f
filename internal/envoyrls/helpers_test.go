package envoyrls

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/storetest"
)

// Building configurations by hand, independent of config's parser.

// pol returns a fixed-window policy of limit per period, whose YAML name
// (reported in current_limit) is its name; opts adjust it.
func pol(name string, limit int64, period time.Duration, opts ...func(*config.Policy)) *config.Policy {
	p := &config.Policy{Policy: sluice.Policy{Name: name, Algorithm: sluice.FixedWindow, Limit: limit, Period: period}, RuleName: name}
	for _, o := range opts {
		o(p)
	}
	if err := p.Validate(); err != nil && !p.DeniesAll() {
		panic(err)
	}
	return p
}

func shadow(p *config.Policy) { p.Shadow = true }

func ruleName(n string) func(*config.Policy) { return func(p *config.Policy) { p.RuleName = n } }

func replaces(names ...string) func(*config.Policy) {
	return func(p *config.Policy) { p.Replaces = names }
}

func algorithm(a sluice.Algorithm) func(*config.Policy) {
	return func(p *config.Policy) { p.Algorithm = a }
}

// node is a descriptor tree node with limits and children.
func node(key, value string, limits []*config.Policy, children ...*config.Descriptor) *config.Descriptor {
	return &config.Descriptor{Key: key, Value: value, Limits: limits, Children: children}
}

func limits(ps ...*config.Policy) []*config.Policy { return ps }

func unlimited(key, value string) *config.Descriptor {
	return &config.Descriptor{Key: key, Value: value, Unlimited: true}
}

// newConfig returns a Config with one domain per argument (name, then its
// top-level nodes) and every limit of the trees in Policies.
func newConfig(domains ...*config.Domain) *config.Config {
	cfg := &config.Config{Policies: map[string]*config.Policy{}, Domains: map[string]*config.Domain{}}
	var walk func([]*config.Descriptor)
	walk = func(ds []*config.Descriptor) {
		for _, d := range ds {
			for _, p := range d.Limits {
				cfg.Policies[p.Name] = p
			}
			walk(d.Children)
		}
	}
	for _, d := range domains {
		cfg.Domains[d.Name] = d
		walk(d.Descriptors)
	}
	return cfg
}

func domain(name string, nodes ...*config.Descriptor) *config.Domain {
	return &config.Domain{Name: name, Descriptors: nodes}
}

// Stores.

// opener opens a fresh, empty store reading time from clock.
type opener func(t testing.TB, clock sluice.Clock) sluice.Store

func openMemory(_ testing.TB, clock sluice.Clock) sluice.Store {
	return memory.New(memory.WithClock(clock))
}

var redisPrefixes atomic.Int64

// redisOpener starts one redis-server for a whole test and gives each store a
// prefix of its own, so that stores opened on it start empty.
func redisOpener(t testing.TB) opener {
	srv := redistest.Start(t)
	return func(t testing.TB, clock sluice.Clock) sluice.Store {
		prefix := fmt.Sprintf("envoyrls-test-%d-%d:", time.Now().UnixNano(), redisPrefixes.Add(1))
		s, err := redisstore.Open(srv.URL(), redisstore.WithPrefix(prefix), redisstore.WithClock(clock), redisstore.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

// A test environment: a real gRPC server on loopback and a client.

type env struct {
	t      testing.TB
	clock  *storetest.Clock
	svc    *service.Service
	srv    *Server
	client rlsv3.RateLimitServiceClient
	conn   *grpc.ClientConn
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newEnv serves cfg on a store open returns, with the clock 15s into a
// window of every period the tests use.
func newEnv(t testing.TB, open opener, cfg *config.Config, opts ...Option) *env {
	t.Helper()
	return newEnvService(t, open, cfg, nil, opts...)
}

// newEnvService is newEnv with options for the service, given the env's
// clock (to share it with an override store).
func newEnvService(t testing.TB, open opener, cfg *config.Config, svcOpts func(*storetest.Clock) []service.Option, opts ...Option) *env {
	t.Helper()
	clock := storetest.NewClock(storetest.Epoch.Add(15 * time.Second))
	sopts := []service.Option{service.WithLogger(quiet)}
	if svcOpts != nil {
		sopts = append(sopts, svcOpts(clock)...)
	}
	svc := service.New(storestack.Of(open(t, clock)), cfg, sopts...)
	e := &env{t: t, clock: clock, svc: svc, srv: New(svc, append([]Option{WithClock(clock)}, opts...)...)}
	e.conn = serve(t, e.srv.Register)
	e.client = rlsv3.NewRateLimitServiceClient(e.conn)
	return e
}

// serve starts a gRPC server with what register registers on a 127.0.0.1
// port and returns a client connection to it; both are closed at cleanup.
func serve(t testing.TB, register func(grpc.ServiceRegistrar)) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	register(g)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(lis)
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		g.Stop()
		<-done
	})
	return conn
}

// Requests.

// desc is a descriptor of key, value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// withHits sets the descriptor's own hits_addend.
func withHits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func (e *env) do(req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return e.client.ShouldRateLimit(ctx, req)
}

// call sends one request and fails the test on an error.
func (e *env) call(dom string, hits uint32, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	e.t.Helper()
	resp, err := e.do(&rlsv3.RateLimitRequest{Domain: dom, Descriptors: ds, HitsAddend: hits})
	if err != nil {
		e.t.Fatalf("ShouldRateLimit: %v", err)
	}
	if len(resp.Statuses) != len(ds) {
		e.t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(ds))
	}
	return resp
}

// remaining peeks at one descriptor and returns its reported remaining.
func (e *env) remaining(dom string, kv ...string) uint32 {
	e.t.Helper()
	st := e.call(dom, 0, withHits(desc(kv...), 0)).Statuses[0]
	if st.Code != codeOK || st.CurrentLimit == nil {
		e.t.Fatalf("peek at %v: %v, want OK with a limit", kv, st)
	}
	return st.LimitRemaining
}

// Checking statuses.

// want is what a status should say; limit "" means no current_limit.
type want struct {
	code      rlsv3.RateLimitResponse_Code
	limit     string
	remaining uint32
}

func (w want) String() string {
	return fmt.Sprintf("{%v %q remaining %d}", w.code, w.limit, w.remaining)
}

func ok(limit string, remaining uint32) want   { return want{codeOK, limit, remaining} }
func over(limit string, remaining uint32) want { return want{codeOverLimit, limit, remaining} }

var noLimit = want{code: codeOK}

// unlimitedStatus is an unlimited descriptor's status: OK, no limit, the most
// a uint32 holds remaining.
var unlimitedStatus = want{code: codeOK, remaining: math.MaxUint32}

// refusedStatus is the status of a descriptor too large to decide.
var refusedStatus = want{code: codeOverLimit}

// anonymous stands for a current_limit without a name (want.limit "" is no
// current_limit at all).
const anonymous = "(no name)"

func checkStatuses(t testing.TB, resp *rlsv3.RateLimitResponse, overall rlsv3.RateLimitResponse_Code, ws ...want) {
	t.Helper()
	var b strings.Builder
	if resp.OverallCode != overall {
		fmt.Fprintf(&b, "overall_code %v, want %v\n", resp.OverallCode, overall)
	}
	for i, w := range ws {
		st := resp.Statuses[i]
		got := want{code: st.Code, remaining: st.LimitRemaining}
		if st.CurrentLimit != nil {
			got.limit = st.CurrentLimit.Name
			if got.limit == "" {
				got.limit = anonymous
			}
		}
		if got != w {
			fmt.Fprintf(&b, "status %d: %v, want %v\n", i, got, w)
		}
		if w.limit == "" && (st.CurrentLimit != nil || st.DurationUntilReset != nil) {
			fmt.Fprintf(&b, "status %d: %v, want no limit\n", i, st)
		}
		if w.limit != "" && st.DurationUntilReset.AsDuration() <= 0 {
			fmt.Fprintf(&b, "status %d: duration_until_reset %v, want > 0\n", i, st.DurationUntilReset)
		}
	}
	if b.Len() > 0 {
		t.Fatalf("%s", b.String())
	}
}

// failingStore fails every call, as a store that lost its server does.
type failingStore struct{}

var errDown = fmt.Errorf("connection refused")

func (failingStore) Decide(context.Context, sluice.Request) (sluice.Result, error) {
	return sluice.Result{}, errDown
}

func (failingStore) DecideAll(context.Context, []sluice.Request, []sluice.Result) error {
	return errDown
}
