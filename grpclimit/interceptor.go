package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Interceptor limits the calls of a gRPC server. Build one with New and
// install its UnaryServerInterceptor and StreamServerInterceptor; both share
// its limits. It is safe for concurrent use.
type Interceptor struct {
	cfg       config
	enforced  []limit
	shadow    []limit
	policyAll string // ratelimit-policy when every enforced limit applies
}

// New returns an Interceptor for the limits and settings in opts. It needs at
// least one Limit.
func New(opts ...Option) (*Interceptor, error) {
	in := &Interceptor{cfg: config{v6Bits: 64, maxDelay: DefaultMaxDelay, policyName: map[string]bool{}}}
	for _, o := range opts {
		if err := o(&in.cfg); err != nil {
			return nil, err
		}
	}
	c := &in.cfg
	c.policyName = nil
	if len(c.limits) == 0 {
		return nil, errors.New("grpclimit: New: no limits; add one with Limit")
	}
	for _, l := range c.limits {
		if l.shadow || c.shadowAll {
			in.shadow = append(in.shadow, l)
		} else {
			in.enforced = append(in.enforced, l)
		}
	}
	quotas := make([]Quota, len(in.enforced))
	for i := range in.enforced {
		quotas[i].Policy = &in.enforced[i].policy
	}
	in.policyAll = httplimit.FormatPolicy(quotas)
	if c.logger == nil {
		c.logger = slog.Default()
	}
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
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		err := in.admit(ctx, info.FullMethod, func(md metadata.MD) { grpc.SetHeader(ctx, md) })
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor returns the interceptor for streams: a stream is
// counted once, when it is created.
func (in *Interceptor) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := in.admit(ss.Context(), info.FullMethod, func(md metadata.MD) { ss.SetHeader(md) }); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// admit decides a call: nil to go on (after any leaky-bucket delay), or the
// error to return. setHeader attaches the rate-limit metadata to the response
// header; gRPC sends it with the status when the call fails before any
// message.
func (in *Interceptor) admit(ctx context.Context, method string, setHeader func(metadata.MD)) error {
	c := &call{ctx: ctx, method: method, in: in}
	cost := int64(1)
	if in.cfg.cost != nil {
		cost = in.cfg.cost(ctx, method)
	}
	quotas, admitted, err := in.decide(c, cost)
	if err != nil {
		return in.cfg.onError(ctx, method, err)
	}
	if len(in.shadow) > 0 {
		in.decideShadow(c, cost, admitted)
	}
	if !admitted {
		retry := quotas[0].Result.RetryAfter // the batch's, on every result
		if in.cfg.jitter > 0 {
			retry += rand.N(in.cfg.jitter)
		}
		setHeader(in.metadata(quotas, retry))
		return denial(quotas, cost, retry)
	}
	if !in.cfg.quiet && len(quotas) > 0 {
		setHeader(in.metadata(quotas, 0))
	}
	var delay time.Duration
	for _, q := range quotas {
		delay = max(delay, q.Result.Delay)
	}
	if delay = min(delay, in.cfg.maxDelay); delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	return nil
}

// decide checks the enforced limits that have a key for the call, all or
// nothing; see httplimit.Middleware, which decides alike.
func (in *Interceptor) decide(c *call, cost int64) ([]Quota, bool, error) {
	checks := make([]sluice.Check, 0, len(in.enforced))
	quotas := make([]Quota, 0, len(in.enforced))
	for i := range in.enforced {
		l := &in.enforced[i]
		key, err := l.keyFor(c)
		if err != nil {
			return nil, false, err
		}
		if key == "" {
			continue
		}
		checks = append(checks, sluice.Check{Limiter: l.limiter, Key: key, Cost: cost, Peek: cost == 0})
		quotas = append(quotas, Quota{Policy: &l.policy})
	}
	if len(checks) == 0 {
		return nil, true, nil
	}
	results, err := sluice.AllowAll(c.ctx, checks...)
	if err != nil {
		return nil, false, err
	}
	for i := range results {
		quotas[i].Result = results[i]
	}
	return quotas, results[0].Allowed, nil
}

// decideShadow decides each shadow limit on its own: charged when the call
// was admitted, peeked at otherwise. Failures are logged, never returned.
func (in *Interceptor) decideShadow(c *call, cost int64, admitted bool) {
	n := cost
	if !admitted {
		n = 0
	}
	for i := range in.shadow {
		l := &in.shadow[i]
		key, err := l.keyFor(c)
		if err == nil && key == "" {
			continue
		}
		var res sluice.Result
		if err == nil {
			res, err = l.limiter.AllowN(c.ctx, key, n)
		}
		if err != nil {
			in.cfg.logger.WarnContext(c.ctx, "grpclimit: shadow limit failed", "policy", l.policy.Name, "err", err)
			continue
		}
		switch {
		case admitted && !res.Allowed:
			in.cfg.onShadow(c.ctx, c.method, ShadowDenial{Quota: Quota{Policy: &l.policy, Result: res}})
		case !admitted && res.Remaining < cost:
			res.Allowed = false
			in.cfg.onShadow(c.ctx, c.method, ShadowDenial{Quota: Quota{Policy: &l.policy, Result: res}, Denied: true})
		}
	}
}

// keyFor returns the store key of the call under l, or "" when the limit does
// not apply to it.
func (l *limit) keyFor(c *call) (string, error) {
	k, err := l.key.get(c)
	if err != nil {
		return "", fmt.Errorf("grpclimit: key of limit %q: %w", l.policy.Name, err)
	}
	if l.fallback.get == nil {
		return fitKey(k), nil
	}
	// Distinct prefixes keep the two key spaces apart.
	if k != "" {
		return fitKey("key:" + k), nil
	}
	if k, err = l.fallback.get(c); err != nil {
		return "", fmt.Errorf("grpclimit: fallback key of limit %q: %w", l.policy.Name, err)
	}
	if k == "" {
		return "", nil
	}
	return fitKey("fallback:" + k), nil
}

func (in *Interceptor) defaultShadow(ctx context.Context, method string, d ShadowDenial) {
	in.cfg.logger.WarnContext(ctx, "grpclimit: shadow limit would deny",
		"policy", d.Policy.Name, "retry_after", d.Result.RetryAfter, "denied_anyway", d.Denied, "method", method)
}
