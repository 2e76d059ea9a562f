package service

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/tracing"
)

// WithTracing traces decisions with OpenTelemetry on tp (nil: off, the
// default): a span for each store call, and the policies and outcome of
// each decision on the caller's span, which the HTTP and Envoy front ends
// start for each request. With keys the spans also carry the rate limit
// keys, which are made of request data.
func WithTracing(tp trace.TracerProvider, keys bool) Option {
	return func(o *options) { o.tracer = tracing.New(tp, keys) }
}

// Tracer returns the tracer of the front ends over s: nil when tracing is
// off.
func (s *Service) Tracer() *tracing.Tracer { return s.tracer }

// TracedStore returns the store, traced when tracing is on: for front ends
// that call it directly.
func (s *Service) TracedStore() sluice.Store { return s.decider }

// noteDecision records a decision on ctx's span.
func (s *Service) noteDecision(ctx context.Context, checks []Check, results []sluice.Result, allowed bool, err error) {
	if !tracing.Recording(ctx) {
		return
	}
	d := tracing.Decision{Policies: make([]string, len(checks)), Allowed: allowed, Err: err}
	if s.tracer.Keys() {
		d.Keys = make([]string, len(checks))
	}
	for i, c := range checks {
		if c.Policy != nil {
			d.Policies[i] = c.Policy.Name
		}
		if d.Keys != nil {
			d.Keys[i] = c.Key
		}
		if err == nil {
			d.Shadow = d.Shadow || (c.Policy.Shadow && !results[i].Allowed)
			if results[i].Degraded {
				d.FailPolicy = s.failMode()
			}
		}
	}
	if errors.Is(err, failover.ErrUnavailable) {
		d.FailPolicy = failover.FailClosed.String()
	}
	s.tracer.Note(ctx, d)
}
