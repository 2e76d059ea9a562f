package tracing

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
)

// SpanCharge names the span of a charge.
const SpanCharge = "sluice.store/Charge"

var _ sluice.Charger = (*Store)(nil)

// Charge implements sluice.Charger: a span, as for a decision, whose outcome
// says whether the charge fitted what was left.
func (s *Store) Charge(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	c, ok := s.inner.(sluice.Charger)
	if !ok {
		return sluice.Result{}, fmt.Errorf("%w (%T)", sluice.ErrNotChargeable, s.inner)
	}
	ctx, span := s.t.tracer.Start(ctx, SpanCharge, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.Int64("sluice.cost", req.Cost)))
	defer span.End()
	r, err := c.Charge(ctx, req)
	if span.IsRecording() {
		d := Decision{Policies: []string{policyName(req.Policy)}, Allowed: r.Allowed, Err: err}
		if s.t.keys {
			d.Keys = []string{req.Key}
		}
		s.note(span, &d, r.Degraded)
	}
	return r, err
}

// ChargeAll implements sluice.Charger: each charge as Charge.
func (s *Store) ChargeAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	for i, req := range reqs {
		r, err := s.Charge(ctx, req)
		if err != nil {
			return err
		}
		results[i] = r
	}
	return nil
}
