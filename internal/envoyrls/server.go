package envoyrls

import (
	"context"
	"errors"
	"log/slog"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/tracing"
)

// Default caps on a request's size. Envoy sends a handful of descriptors of a
// few entries each; the caps only bound the work one malformed or hostile
// request can cause.
const (
	DefaultMaxDescriptors = 64
	DefaultMaxEntries     = 16
)

// ServiceName is the gRPC service name of the rate limit service, which the
// health service also reports on.
const ServiceName = "envoy.service.ratelimit.v3.RateLimitService"

// Server implements Envoy's RateLimitService over a service.Service. It is safe
// for concurrent use.
type Server struct {
	svc            *service.Service
	clock          sluice.Clock
	health         *health.Server
	log            *slog.Logger
	headers        bool
	limitHeaders   LimitHeaderNames
	overrides      bool
	maxDescriptors int
	maxEntries     int

	dynamicMetadata bool
	unknownDomains  prometheus.Counter
}

var _ rlsv3.RateLimitServiceServer = (*Server)(nil)

// Option configures a Server.
type Option func(*Server)

// WithHeaders makes every response carry RateLimit-Policy and RateLimit
// (draft-ietf-httpapi-ratelimit-headers) for the limits it reports, and
// Retry-After when the request is denied, in response_headers_to_add: Envoy
// adds them to the response its client gets. Off by default, as Envoy's own
// x-ratelimit headers may be configured instead.
func WithHeaders(on bool) Option { return func(s *Server) { s.headers = on } }

// WithMaxDescriptors caps the descriptors of one request (n ≥ 1, default
// DefaultMaxDescriptors); a request with more is OVER_LIMIT, every
// descriptor undecided.
func WithMaxDescriptors(n int) Option { return func(s *Server) { s.maxDescriptors = max(1, n) } }

// WithMaxEntries caps the entries of one descriptor (n ≥ 1, default
// DefaultMaxEntries); a descriptor with more is OVER_LIMIT, undecided, and
// so is its request.
func WithMaxEntries(n int) Option { return func(s *Server) { s.maxEntries = max(1, n) } }

// WithLimitOverrides says whether a descriptor's limit override (Envoy's
// "limit" descriptor field, set from dynamic metadata) is honoured, as
// envoyproxy/ratelimit does: on by default. Turn it off when the proxies
// sending requests are not trusted to choose their own limits; the configured
// limits then apply as if no override had been sent.
func WithLimitOverrides(on bool) Option { return func(s *Server) { s.overrides = on } }

// WithClock sets the clock that times the current window for
// duration_until_reset (default sluice.SystemClock); the store's decisions
// use the store's own clock.
func WithClock(c sluice.Clock) Option { return func(s *Server) { s.clock = c } }

// New returns a Server deciding with svc. Its health service reports SERVING
// until SetServing(false) or Shutdown. It does not follow the store: a store
// opened by storestack.Open answers by its fail policy while it cannot
// decide.
func New(svc *service.Service, opts ...Option) *Server {
	s := &Server{
		svc:            svc,
		clock:          sluice.SystemClock(),
		health:         health.NewServer(),
		log:            svc.Logger(),
		overrides:      true,
		maxDescriptors: DefaultMaxDescriptors,
		maxEntries:     DefaultMaxEntries,
		unknownDomains: unknownDomainCounter(svc.Registry()),
	}
	for _, o := range opts {
		o(s)
	}
	s.SetServing(true)
	return s
}

// Register registers the rate limit service and the standard gRPC health
// service (grpc.health.v1.Health) on g, usually a *grpc.Server.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	g.RegisterService(&serviceDesc, s) // rlsv3's, with a lenient decoder: see decode.go
	healthpb.RegisterHealthServer(g, s.health)
}

// SetServing sets what the health service reports, for the server as a
// whole ("") and for the rate limit service: SERVING or NOT_SERVING. Call
// it with false while the server should take no traffic yet (sluice serve:
// while it waits for its first configuration from an xDS server, as /readyz
// does), then with true. It has no effect after Shutdown.
func (s *Server) SetServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(ServiceName, st)
}

// Shutdown makes the health service report NOT_SERVING, for good: call it when
// the process starts draining, so that health-checking load balancers and
// Envoy's active health checks move traffic away before the gRPC server
// stops. Requests still arriving are answered normally.
func (s *Server) Shutdown() { s.health.Shutdown() }

// ShouldRateLimit implements RateLimitServiceServer: it decides every limit the
// request's descriptors match, all or nothing, and reports one status per
// descriptor.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	t := s.svc.Tracer()
	if t == nil {
		return s.shouldRateLimit(ctx, req)
	}
	ctx, span := t.StartRateLimit(ctx, ServiceName, "ShouldRateLimit", req.GetDomain(), len(req.GetDescriptors()))
	resp, err := s.shouldRateLimit(ctx, req)
	tracing.EndRateLimit(span, resp.GetOverallCode() == rlsv3.RateLimitResponse_OK, err)
	return resp, err
}

func (s *Server) shouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if req.GetDomain() == "" {
		return nil, status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	}
	n := len(req.GetDescriptors())
	if n == 0 {
		// As envoyproxy/ratelimit: a request without descriptors is a client bug.
		return nil, status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	}
	// One configuration for the whole request: a reload in the middle of it
	// must not match some descriptors against the old tree and some against
	// the new one.
	cfg := s.svc.Config()
	dom := cfg.Domains[req.GetDomain()]
	if n > s.maxDescriptors {
		return s.withMetadata(refuseAll(n, dom != nil && dom.Shadow), req), nil
	}
	if dom == nil {
		s.unknownDomain(ctx, req.GetDomain())
	}
	sc := getScratch()
	defer putScratch(sc)
	sc.shadow = dom != nil && dom.Shadow
	s.collect(sc, cfg, req)
	sc.plan()
	err := s.svc.DecideRequest(ctx, &sc.req)
	if errors.Is(err, failover.ErrUnavailable) && ctx.Err() == nil {
		// store.on_error: closed. Answering an error would hand the choice to
		// Envoy's failure_mode_deny, which defaults to letting requests
		// through; a denial is what was configured.
		s.log.Debug("rate limit store unavailable; failing closed", "domain", req.GetDomain(), "error", err)
		return s.withMetadata(s.respond(sc, n), req), nil
	}
	if err != nil {
		return nil, s.decideError(ctx, sc, req.GetDomain(), err)
	}
	return s.withMetadata(s.respond(sc, n), req), nil
}

// withMetadata adds the request's dynamic metadata to resp when
// WithDynamicMetadata is on.
func (s *Server) withMetadata(resp *rlsv3.RateLimitResponse, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	if s.dynamicMetadata {
		resp.DynamicMetadata = requestMetadata(req)
	}
	return resp
}

// unknownDomain records a request for a domain no configuration has, which
// is OK without a limit (as envoyproxy/ratelimit): most likely a typo in
// Envoy's or Sluice's configuration. The domain is request data, so it is
// logged at debug level, not used as a metric label.
func (s *Server) unknownDomain(ctx context.Context, domain string) {
	s.unknownDomains.Inc()
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.DebugContext(ctx, "unknown rate limit domain: no limits apply", "domain", domain)
	}
}

// unknownDomainCounter is the counter of requests for unknown domains, on
// reg; registered once per registry, however many Servers share it.
func unknownDomainCounter(reg prometheus.Registerer) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_rls_unknown_domain_total",
		Help: "Rate limit requests (Envoy RLS) for a domain no configuration has; answered OK without a limit.",
	})
	if err := reg.Register(c); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			return are.ExistingCollector.(prometheus.Counter)
		}
		panic(err)
	}
	return c
}

// refused is the status of a descriptor that could not be decided.
var refused = &rlsv3.RateLimitResponse_DescriptorStatus{Code: codeOverLimit}

// refuseAll answers a request of n descriptors, too many to decide: denied,
// since an error would be let through by an Envoy failing open, unless its
// domain is in shadow mode. Every status is the one shared message, so the
// answer costs 8 bytes per descriptor however many a hostile request holds.
func refuseAll(n int, shadow bool) *rlsv3.RateLimitResponse {
	resp := &rlsv3.RateLimitResponse{OverallCode: codeOverLimit, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)}
	if shadow {
		resp.OverallCode = codeOK
	}
	for i := range resp.Statuses {
		resp.Statuses[i] = refused
	}
	return resp
}

// decideError maps a decision's error to a gRPC status. Messages name
// descriptors and policies, never keys: a key is made of request data.
func (s *Server) decideError(ctx context.Context, sc *scratch, domain string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return status.FromContextError(ctxErr).Err()
	}
	var ce *engine.CheckError
	switch {
	case errors.As(err, &ce):
		// The checks were validated while collecting them; this is a
		// safety net, so it stays specific enough to debug.
		return status.Errorf(codes.InvalidArgument, "descriptor %d: %v", sc.descriptorOf(ce.Index), ce)
	case errors.Is(err, engine.ErrStore):
		s.log.Debug("rate limit store failure", "domain", domain, "error", err)
		return status.Errorf(codes.Unavailable, "rate limit store unavailable: %v", err)
	default:
		return status.Errorf(codes.Internal, "deciding: %v", err)
	}
}
