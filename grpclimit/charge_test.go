package grpclimit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/internal/testwait"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A service whose handlers report the usage the request's Service field
// names in the x-tokens-used trailer: Report (unary) with grpc.SetTrailer,
// Stream with ServerStream.SetTrailer, StreamCtx with grpc.SetTrailer on the
// stream's context. An empty Service sets no trailer.
const (
	reportMethod    = "/test.Usage/Report"
	streamMethod    = "/test.Usage/Stream"
	streamCtxMethod = "/test.Usage/StreamCtx"
)

func setUsage(ctx context.Context, req *healthpb.HealthCheckRequest) {
	if req.Service != "" {
		for _, v := range strings.Split(req.Service, ",") {
			grpc.SetTrailer(ctx, metadata.Pairs("x-tokens-used", v))
		}
	}
}

func streamHandler(viaCtx bool) grpc.StreamHandler {
	return func(_ any, ss grpc.ServerStream) error {
		req := new(healthpb.HealthCheckRequest)
		if err := ss.RecvMsg(req); err != nil {
			return err
		}
		switch {
		case req.Service == "":
		case viaCtx:
			setUsage(ss.Context(), req)
		default:
			ss.SetTrailer(metadata.Pairs("x-tokens-used", req.Service))
		}
		return ss.SendMsg(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
	}
}

var usageService = grpc.ServiceDesc{
	ServiceName: "test.Usage",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Report",
		Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			req := new(healthpb.HealthCheckRequest)
			if err := dec(req); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, r any) (any, error) {
				setUsage(ctx, r.(*healthpb.HealthCheckRequest))
				return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
			}
			return icpt(ctx, req, &grpc.UnaryServerInfo{FullMethod: reportMethod}, h)
		},
	}},
	Streams: []grpc.StreamDesc{
		{StreamName: "Stream", Handler: streamHandler(false), ClientStreams: true, ServerStreams: true},
		{StreamName: "StreamCtx", Handler: streamHandler(true), ClientStreams: true, ServerStreams: true},
	},
}

// startUsage serves usageService behind the interceptors on 127.0.0.1.
func startUsage(t *testing.T, opts ...grpclimit.Option) *grpc.ClientConn {
	t.Helper()
	return serve(t, func(srv *grpc.Server) { srv.RegisterService(&usageService, struct{}{}) }, opts...)
}

// report makes a unary call reporting used (see usageService) and returns
// its error and the trailer the client received.
func report(conn *grpc.ClientConn, used string) (metadata.MD, error) {
	var tr metadata.MD
	err := conn.Invoke(context.Background(), reportMethod, &healthpb.HealthCheckRequest{Service: used},
		new(healthpb.HealthCheckResponse), grpc.Trailer(&tr))
	return tr, err
}

// streamReport opens method's stream, sends used and reads the answer.
func streamReport(conn *grpc.ClientConn, method, used string) error {
	desc := &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}
	s, err := conn.NewStream(context.Background(), desc, method)
	if err != nil {
		return err
	}
	if err := s.SendMsg(&healthpb.HealthCheckRequest{Service: used}); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	return s.RecvMsg(new(healthpb.HealthCheckResponse))
}

func zeroCost(context.Context, string) int64 { return 0 }

// A fixed window of 10 a minute, checked with a peek: a unary call
// reporting 15 tokens puts its key in debt, denied until the window ends;
// the trailer reaches the client unchanged.
func TestChargeFromTrailerUnary(t *testing.T) {
	store, clock := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "tokens", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute})
	conn := startUsage(t, grpclimit.Limit(lim, grpclimit.ByMethod(), grpclimit.WithChargeFromTrailer("X-Tokens-Used")),
		grpclimit.WithCost(zeroCost))

	tr, err := report(conn, "15")
	if err != nil {
		t.Fatalf("first call: %v", err)
	}
	if got := tr.Get("x-tokens-used"); len(got) != 1 || got[0] != "15" {
		t.Fatalf("the client's trailer: %q, want [15]", got)
	}
	if got := left(t, lim, reportMethod); got != -5 {
		t.Fatalf("remaining after a charge of 15 on 10: %d, want -5 (a debt)", got)
	}
	clock.Advance(20 * time.Second)
	if _, err := report(conn, ""); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("in debt: %v, want ResourceExhausted", err)
	}
	clock.Advance(40 * time.Second)
	if _, err := report(conn, ""); err != nil {
		t.Fatalf("next window: %v", err)
	}
}

// A stream is charged once, when it ends, whether its handler sets the
// trailer on the stream or through its context.
func TestChargeFromTrailerStream(t *testing.T) {
	for _, method := range []string{streamMethod, streamCtxMethod} {
		t.Run(method, func(t *testing.T) {
			store, _ := fakeStore()
			lim := newLimiter(t, store, sluice.Policy{Name: "tokens", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Minute})
			conn := startUsage(t, grpclimit.Limit(lim, grpclimit.Global(), grpclimit.WithChargeFromTrailer("x-tokens-used")),
				grpclimit.WithCost(zeroCost))
			for range 2 {
				if err := streamReport(conn, method, "30"); err != nil {
					t.Fatal(err)
				}
			}
			// The charge is made after the handler returns, which may be
			// after the client has its answer; a peek waits for nothing,
			// so poll the state (no time passes on the fake clock).
			testwait.Until(t, "two charges of 30", func() bool { return left(t, lim, "global") == 40 })
		})
	}
}

// A trailer that is not one count charges nothing and is logged; so is a
// call without it.
func TestChargeFromTrailerBadValues(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "tokens", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute})
	var logs testlog.Buffer
	conn := startUsage(t, grpclimit.Limit(lim, grpclimit.Global(), grpclimit.WithChargeFromTrailer("x-tokens-used")),
		grpclimit.WithCost(zeroCost), grpclimit.WithLogger(testlog.Logger(&logs)))
	for _, v := range []string{"-3", "3 tokens", "3,4", "99999999999999999999", ""} {
		if _, err := report(conn, v); err != nil {
			t.Fatalf("%q: %v", v, err)
		}
	}
	if got := left(t, lim, "global"); got != 10 {
		t.Fatalf("remaining after bad reports: %d, want 10 (nothing charged)", got)
	}
	if n := strings.Count(logs.String(), "usage cannot be read"); n != 4 {
		t.Fatalf("%d warnings, want 4 (one per unreadable trailer):\n%s", n, logs.String())
	}
}

// WithChargeFunc sees the unary response and the handler's error.
func TestChargeFunc(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "tokens", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute})
	var sawResp, sawErr []any
	charge := func(ctx context.Context, method string, resp any, err error) int64 {
		sawResp, sawErr = append(sawResp, resp), append(sawErr, err)
		if r, ok := resp.(*healthpb.HealthCheckResponse); ok && r.Status == healthpb.HealthCheckResponse_SERVING && method == reportMethod {
			return 4
		}
		return 0
	}
	conn := startUsage(t, grpclimit.Limit(lim, grpclimit.Global(), grpclimit.WithChargeFunc(charge)), grpclimit.WithCost(zeroCost))
	for range 2 {
		if _, err := report(conn, ""); err != nil {
			t.Fatal(err)
		}
	}
	if got := left(t, lim, "global"); got != 2 {
		t.Fatalf("remaining after two charges of 4 on 10: %d, want 2", got)
	}
	if len(sawResp) != 2 || sawErr[0] != nil {
		t.Fatalf("the function saw %v, %v", sawResp, sawErr)
	}
}

// A concurrency limit cannot be charged.
func TestChargeRefusedOnConcurrency(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "open", Algorithm: sluice.Concurrency, Limit: 1, Period: time.Hour})
	_, err := grpclimit.New(grpclimit.Limit(lim, grpclimit.Global(), grpclimit.WithChargeFromTrailer("x-tokens-used")))
	if err == nil || !strings.Contains(err.Error(), "cannot be charged") {
		t.Fatalf("New: %v, want a refusal", err)
	}
}

// left returns what key has left under l, negative while it owes units: a
// charge of 0 records nothing and reports it.
func left(t testing.TB, l *sluice.Limiter, key string) int64 {
	t.Helper()
	res, err := l.Charge(context.Background(), key, 0)
	if err != nil {
		t.Fatal(err)
	}
	return res.Remaining
}
