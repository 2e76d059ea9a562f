package grpclimit

import (
	"context"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/limitcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Interceptor limits the calls of a gRPC server. Build one with New and
// install its UnaryServerInterceptor and StreamServerInterceptor; both share
// its limits. It is safe for concurrent use.
type Interceptor struct {
	cfg  config
	core *limitcore.Core[*call]
}

// New returns an Interceptor for the limits and settings in opts. It needs at
// least one Limit.
func New(opts ...Option) (*Interceptor, error) {
	in := &Interceptor{cfg: config{Settings: limitcore.NewSettings[*call]("grpclimit")}}
	for _, o := range opts {
		if err := o(&in.cfg); err != nil {
			return nil, err
		}
	}
	c := &in.cfg
	core, err := limitcore.New(&c.Settings, httplimit.FormatPolicy, func(ctx context.Context, cl *call, q Quota, denied bool) {
		c.onShadow(ctx, cl.method, ShadowDenial{Quota: q, Denied: denied})
	})
	if err != nil {
		return nil, err
	}
	in.core = core
	if c.onError == nil {
		c.onError = in.defaultError
	}
	if c.onShadow == nil {
		c.onShadow = in.defaultShadow
	}
	return in, nil
}

// UnaryServerInterceptor returns the interceptor for unary calls.
func (in *Interceptor) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		c := &call{ctx: ctx, method: info.FullMethod, in: in}
		d, err := in.admit(c, func(md metadata.MD) { grpc.SetHeader(ctx, md) })
		if err != nil {
			return nil, err
		}
		defer in.core.Release(ctx, &d) // the call's in-flight slots, when the handler returns or panics
		if !in.core.Charges() {
			return handler(ctx, req)
		}
		ctx = c.watchTrailer(ctx)
		defer func() {
			c.resp, c.err = resp, err
			in.core.Charge(ctx, c) // when the handler returns or panics
		}()
		return handler(ctx, req)
	}
}

// StreamServerInterceptor returns the interceptor for streams: a stream is
// counted once, when it is created.
func (in *Interceptor) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		c := &call{ctx: ctx, method: info.FullMethod, in: in}
		d, err := in.admit(c, func(md metadata.MD) { ss.SetHeader(md) })
		if err != nil {
			return err
		}
		defer in.core.Release(ctx, &d) // the stream's in-flight slots, held until it ends
		if !in.core.Charges() {
			return handler(srv, ss)
		}
		defer func() {
			c.err = err
			in.core.Charge(ctx, c) // when the stream ends, however it ends
		}()
		err = handler(srv, chargedStream{ServerStream: ss, ctx: c.watchTrailer(ctx), out: &c.outcome})
		return err
	}
}

// admit decides a call: its decision to go on (after any leaky-bucket
// delay), whose in-flight slots the caller releases when the call ends, or
// the error to return. setHeader attaches the rate-limit metadata to the response
// header; gRPC sends it with the status when the call fails before any
// message.
func (in *Interceptor) admit(c *call, setHeader func(metadata.MD)) (limitcore.Decision, error) {
	ctx, method := c.ctx, c.method
	cost := int64(1)
	if in.cfg.cost != nil {
		cost = in.cfg.cost(ctx, method)
	}
	d, err := in.core.Decide(ctx, c, cost)
	if err != nil {
		return limitcore.Decision{}, in.cfg.onError(ctx, method, err)
	}
	if !d.Allowed {
		setHeader(in.metadata(d.Quotas, d.RetryAfter))
		return limitcore.Decision{}, denial(d.Violated, d.RetryAfter)
	}
	if !in.cfg.Quiet && len(d.Quotas) > 0 {
		setHeader(in.metadata(d.Quotas, 0))
	}
	if err := limitcore.Wait(ctx, d.Delay); err != nil {
		in.core.Release(ctx, &d)
		return limitcore.Decision{}, status.FromContextError(err).Err()
	}
	return d, nil
}

func (in *Interceptor) defaultShadow(ctx context.Context, method string, d ShadowDenial) {
	in.cfg.Logger.WarnContext(ctx, "grpclimit: shadow limit would deny",
		"policy", d.Policy.Name, "retry_after", d.Result.RetryAfter, "denied_anyway", d.Denied, "method", method)
}
