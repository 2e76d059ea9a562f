package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
)

// Store names of the store spans.
const (
	SpanDecide    = "sluice.store/Decide"
	SpanDecideAll = "sluice.store/DecideAll"
)

// Store traces every Decide and DecideAll of a store: a span each, with the
// policies, the outcome, and, when the store's fail policy decided, that
// policy.
type Store struct {
	inner sluice.Store
	t     *Tracer
	mode  string // the fail policy under inner; "none" or "" without one
}

// Tracer returns the tracer s records on.
func (s *Store) Tracer() *Tracer { return s.t }

// WrapStore returns inner traced by t; failMode names the fail policy
// (store.on_error) inside inner, which spans name when it decided.
func (t *Tracer) WrapStore(inner sluice.Store, failMode string) *Store {
	return &Store{inner: inner, t: t, mode: failMode}
}

// Decide implements sluice.Store.
func (s *Store) Decide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	ctx, span := s.t.tracer.Start(ctx, SpanDecide, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.Int64("sluice.cost", req.Cost)))
	defer span.End()
	r, err := s.inner.Decide(ctx, req)
	if span.IsRecording() {
		d := Decision{Policies: []string{policyName(req.Policy)}, Allowed: r.Allowed, Err: err}
		if s.t.keys {
			d.Keys = []string{req.Key}
		}
		s.note(span, &d, r.Degraded)
	}
	return r, err
}

// DecideAll implements sluice.Store.
func (s *Store) DecideAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	ctx, span := s.t.tracer.Start(ctx, SpanDecideAll, trace.WithSpanKind(trace.SpanKindInternal))
	defer span.End()
	err := s.inner.DecideAll(ctx, reqs, results)
	if span.IsRecording() {
		d := Decision{Policies: make([]string, len(reqs)), Allowed: err == nil, Err: err}
		if s.t.keys {
			d.Keys = make([]string, len(reqs))
		}
		degraded := false
		for i, r := range reqs {
			d.Policies[i] = policyName(r.Policy)
			if d.Keys != nil {
				d.Keys[i] = r.Key
			}
			if err == nil {
				d.Allowed = d.Allowed && results[i].Allowed
				degraded = degraded || results[i].Degraded
			}
		}
		s.note(span, &d, degraded)
	}
	return err
}

// note records d on the store's span: a degraded result, or failing
// closed, names the fail policy that decided.
func (s *Store) note(span trace.Span, d *Decision, degraded bool) {
	if degraded {
		d.FailPolicy = cmp.Or(s.mode, "unknown")
	}
	if errors.Is(d.Err, failover.ErrUnavailable) {
		d.FailPolicy = failover.FailClosed.String()
	}
	s.t.record(span, *d)
}

func policyName(p *sluice.Policy) string {
	if p == nil {
		return ""
	}
	return p.Name
}

// Store names of the slot spans.
const (
	SpanAcquireSlot = "sluice.store/AcquireSlot"
	SpanReleaseSlot = "sluice.store/ReleaseSlot"
)

// AcquireSlot implements sluice.SlotStore when the store under s does.
func (s *Store) AcquireSlot(ctx context.Context, req sluice.Request) (sluice.Result, string, error) {
	inner, ok := s.inner.(sluice.SlotStore)
	if !ok {
		return sluice.Result{}, "", fmt.Errorf("tracing: the store (%T) holds no in-flight slots", s.inner)
	}
	ctx, span := s.t.tracer.Start(ctx, SpanAcquireSlot, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.Int64("sluice.cost", req.Cost)))
	defer span.End()
	r, token, err := inner.AcquireSlot(ctx, req)
	if span.IsRecording() {
		d := Decision{Policies: []string{policyName(req.Policy)}, Allowed: r.Allowed, Err: err}
		if s.t.keys {
			d.Keys = []string{req.Key}
		}
		s.note(span, &d, r.Degraded)
	}
	return r, token, err
}

// ReleaseSlot implements sluice.SlotStore when the store under s does.
func (s *Store) ReleaseSlot(ctx context.Context, p *sluice.Policy, key, token string) (bool, error) {
	inner, ok := s.inner.(sluice.SlotStore)
	if !ok {
		return false, fmt.Errorf("tracing: the store (%T) holds no in-flight slots", s.inner)
	}
	ctx, span := s.t.tracer.Start(ctx, SpanReleaseSlot, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("sluice.policy", policyName(p))))
	defer span.End()
	held, err := inner.ReleaseSlot(ctx, p, key, token)
	if err != nil {
		span.RecordError(err)
	}
	span.SetAttributes(attribute.Bool("sluice.released", held))
	return held, err
}
