package tracing

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
)

// Store names of the charge spans.
const (
	SpanCharge    = "sluice.store/Charge"
	SpanChargeAll = "sluice.store/ChargeAll"
)

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
	s.noteOne(span, req, r, err)
	return r, err
}

// ChargeAll implements sluice.Charger: one span for the charges, which the
// store below makes in as few calls as it can.
func (s *Store) ChargeAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	c, ok := s.inner.(sluice.Charger)
	if !ok {
		return fmt.Errorf("%w (%T)", sluice.ErrNotChargeable, s.inner)
	}
	ctx, span := s.t.tracer.Start(ctx, SpanChargeAll, trace.WithSpanKind(trace.SpanKindInternal))
	defer span.End()
	err := c.ChargeAll(ctx, reqs, results)
	s.noteAll(span, reqs, results, err)
	return err
}
