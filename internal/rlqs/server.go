package rlqs

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/service"
)

// ServiceName is the gRPC service name of the rate limit quota service.
const ServiceName = "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"

// StreamMethod is the full name of its one method, a stream as long-lived
// as the Envoy: a server's limit on an RPC's duration must spare it (its
// first report has WithFirstReportTimeout instead).
const StreamMethod = "/" + ServiceName + "/StreamRateLimitQuotas"

// Defaults of the caps; see the With… options.
const (
	DefaultMaxBuckets         = 1000
	DefaultMaxStreams         = 10000
	DefaultFirstReportTimeout = 30 * time.Second
	// TTLIntervals is an assignment's time to live in report intervals: an
	// Envoy that misses one report keeps its assignment, and a bucket whose
	// reports stop for that long is abandoned.
	TTLIntervals = 3
	// MinTTL is the shortest assignment time to live, whatever the interval.
	MinTTL = 2 * time.Second
	// FirstTTL is the time to live of the assignments answering a
	// subscription, whose report interval is not known yet: long enough
	// for the slowest usual interval, since the next report replaces it.
	FirstTTL = time.Minute
)

// Server implements Envoy's RateLimitQuotaService over a service.Service's
// configuration. It is safe for concurrent use.
type Server struct {
	rlqsv3.UnimplementedRateLimitQuotaServiceServer

	svc         *service.Service
	board       Board
	clock       sluice.Clock
	log         *slog.Logger
	node        string
	seq         atomic.Uint64
	maxBuckets  int
	maxStreams  int
	maxElapsed  time.Duration
	firstReport time.Duration
	sweepEvery  time.Duration
	metrics     *metrics

	closing   chan struct{} // closed by Shutdown
	closeOnce sync.Once

	mu       sync.Mutex
	streams  int
	watchers map[string]map[*sub]struct{} // board bucket → the local subscriptions on it
	members  map[string][]Member          // board bucket → its members as last read
}

var _ rlqsv3.RateLimitQuotaServiceServer = (*Server)(nil)

// Option configures a Server.
type Option func(*Server)

// WithBoard sets the Board the Server shares demands on. The default is a
// StoreBoard on the service's store when it keeps demand boards (memory,
// Redis, Redis Cluster, through failover and leases): every node sharing a
// Redis then shares the board. Without one, a MemoryBoard of its own, for a
// single node. Every node serving the same Envoys must share one.
func WithBoard(b Board) Option { return func(s *Server) { s.board = b } }

// WithClock sets the clock timing reports, time to live and abandonment
// (default sluice.SystemClock()).
func WithClock(c sluice.Clock) Option { return func(s *Server) { s.clock = c } }

// WithMaxBuckets caps the buckets one stream subscribes to (n ≥ 1, default
// DefaultMaxBuckets); a report on one more is answered DENY_ALL, untracked.
func WithMaxBuckets(n int) Option { return func(s *Server) { s.maxBuckets = max(1, n) } }

// WithMaxStreams caps the streams open at once (n ≥ 1, default
// DefaultMaxStreams); one more is refused with RESOURCE_EXHAUSTED.
func WithMaxStreams(n int) Option { return func(s *Server) { s.maxStreams = max(1, n) } }

// WithMaxElapsed sets the longest time_elapsed a report may say (default
// DefaultMaxElapsed).
func WithMaxElapsed(d time.Duration) Option {
	return func(s *Server) { s.maxElapsed = max(MinElapsed, d) }
}

// WithFirstReportTimeout sets how long a stream may stay silent before its
// first report (default DefaultFirstReportTimeout); it is then closed with
// DEADLINE_EXCEEDED.
func WithFirstReportTimeout(d time.Duration) Option {
	return func(s *Server) { s.firstReport = max(time.Millisecond, d) }
}

// WithNodeID sets the prefix of this node's member ids on the Board
// (default: random); it must differ between the nodes sharing a Board.
func WithNodeID(id string) Option { return func(s *Server) { s.node = id } }

// New returns a Server assigning quotas by svc's configuration: its
// policies, domains, plans and runtime overrides.
func New(svc *service.Service, opts ...Option) *Server {
	s := &Server{
		svc:         svc,
		clock:       sluice.SystemClock(),
		log:         svc.Logger(),
		maxBuckets:  DefaultMaxBuckets,
		maxStreams:  DefaultMaxStreams,
		maxElapsed:  DefaultMaxElapsed,
		firstReport: DefaultFirstReportTimeout,
		sweepEvery:  MinTTL / 4,
		metrics:     newMetrics(svc.Registry()),
		closing:     make(chan struct{}),
		watchers:    make(map[string]map[*sub]struct{}),
		members:     make(map[string][]Member),
	}
	for _, o := range opts {
		o(s)
	}
	if s.node == "" {
		var b [8]byte
		rand.Read(b[:])
		s.node = hex.EncodeToString(b[:])
	}
	if s.board == nil {
		if st := svc.Stack(); st != nil && st.Board != nil {
			s.board = NewStoreBoard(st.Board)
		} else {
			s.board = NewMemoryBoard(s.clock)
		}
	}
	return s
}

// Register registers the rate limit quota service on g, usually a
// *grpc.Server.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	rlqsv3.RegisterRateLimitQuotaServiceServer(g, s)
}

// Shutdown ends every stream (UNAVAILABLE: each Envoy reconnects, to
// another node) and refuses new ones, so that a gRPC server's graceful stop
// need not wait for streams as long-lived as the Envoys. Call it as the
// server stops taking connections.
func (s *Server) Shutdown() { s.closeOnce.Do(func() { close(s.closing) }) }

// Run abandons, until done is closed, the buckets whose reports stopped:
// each after its assignment's time to live (see Sweep). sluice serve runs
// it beside the gRPC server.
func (s *Server) Run(done <-chan struct{}) {
	t := time.NewTicker(s.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			s.Sweep()
		}
	}
}

// ttlOf is the assignment time to live of a bucket reported every interval
// (0: unknown yet).
func (s *Server) ttlOf(interval time.Duration) time.Duration {
	if interval == 0 {
		return FirstTTL
	}
	return max(MinTTL, TTLIntervals*interval)
}
