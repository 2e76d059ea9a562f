// Package tracing is Sluice's OpenTelemetry instrumentation: a span for each
// HTTP check, each Envoy rate limit call and each store call, with the
// policies and the outcome of the decision, and W3C trace context taken from
// incoming requests.
//
// A nil *Tracer is tracing off, and every front end checks for nil before
// doing anything, so that off costs a pointer comparison per request.
package tracing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
)

// ScopeName is the instrumentation scope of Sluice's spans.
const ScopeName = "github.com/sluicehq/sluice"

// Attribute keys of Sluice's spans.
const (
	KeyPolicies    = attribute.Key("sluice.policies")
	KeyChecks      = attribute.Key("sluice.checks")
	KeyKeys        = attribute.Key("sluice.keys")
	KeyAllowed     = attribute.Key("sluice.allowed")
	KeyOutcome     = attribute.Key("sluice.outcome")
	KeyDegraded    = attribute.Key("sluice.degraded")
	KeyFailPolicy  = attribute.Key("sluice.fail_policy")
	KeyDomain      = attribute.Key("sluice.domain")
	KeyDescriptors = attribute.Key("sluice.descriptors")
	KeyErrorType   = attribute.Key("error.type")
)

// Outcomes, the values of KeyOutcome. A decision made by the fail policy
// has KeyDegraded and KeyFailPolicy besides.
const (
	OutcomeAllowed = "allowed"
	OutcomeDenied  = "denied"
	// OutcomeShadow: allowed, but a shadow policy would have denied.
	OutcomeShadow = "shadow"
	// OutcomeError: no decision; error.type says why.
	OutcomeError = "error"
)

// Tracer starts Sluice's spans. A nil *Tracer is tracing off.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	keys   bool
}

// New returns a Tracer on tp, or nil (off) when tp is nil. With keys the
// spans also carry the rate limit keys, which are made of request data
// (user ids, addresses): off unless asked for.
func New(tp trace.TracerProvider, keys bool) *Tracer {
	if tp == nil {
		return nil
	}
	return &Tracer{tracer: tp.Tracer(ScopeName), prop: propagation.TraceContext{}, keys: keys}
}

// Keys reports whether spans carry the rate limit keys.
func (t *Tracer) Keys() bool { return t.keys }

// Decision is what a front end's span records of one decision.
type Decision struct {
	// Policies names the policy of every check.
	Policies []string
	// Keys are the checks' keys, recorded only when the Tracer is asked to.
	Keys    []string
	Allowed bool
	// Shadow: a shadow policy would have denied an allowed request.
	Shadow bool
	// FailPolicy, when set, is the fail policy (store.on_error) that decided
	// because the store could not.
	FailPolicy string
	Err        error
}

// Recording reports whether ctx's span records, so that callers build a
// Decision only when it will be kept.
func Recording(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }

// Note records d on ctx's span.
func (t *Tracer) Note(ctx context.Context, d Decision) { t.record(trace.SpanFromContext(ctx), d) }

func (t *Tracer) record(span trace.Span, d Decision) {
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{KeyPolicies.StringSlice(d.Policies), KeyChecks.Int(len(d.Policies))}
	if t.keys && d.Keys != nil {
		attrs = append(attrs, KeyKeys.StringSlice(d.Keys))
	}
	if d.Err == nil || d.FailPolicy != "" {
		attrs = append(attrs, KeyAllowed.Bool(d.Allowed), KeyOutcome.String(outcome(d)))
	} else {
		attrs = append(attrs, KeyOutcome.String(OutcomeError))
	}
	if d.FailPolicy != "" {
		// The store could not decide and the fail policy did: the shared
		// limit was not enforced.
		attrs = append(attrs, KeyDegraded.Bool(true), KeyFailPolicy.String(d.FailPolicy))
	}
	span.SetAttributes(attrs...)
	if d.Err != nil {
		fail(span, d.Err)
	}
}

func outcome(d Decision) string {
	switch {
	case !d.Allowed:
		return OutcomeDenied
	case d.Shadow:
		return OutcomeShadow
	}
	return OutcomeAllowed
}

// fail marks span as failed by err, with a cause of low cardinality in
// error.type for grouping. A caller's invalid check is not the span's
// failure: only its cause is recorded.
func fail(span trace.Span, err error) {
	cause := Cause(err)
	span.SetAttributes(KeyErrorType.String(cause))
	if cause != causeInvalid {
		span.SetStatus(codes.Error, err.Error())
	}
}

const causeInvalid = "invalid_check"

// Cause classifies a decision's error: timeout, breaker_open, unavailable
// (failing closed), canceled, invalid_check or store.
func Cause(err error) string {
	switch {
	case errors.Is(err, failover.ErrTimeout):
		return "timeout"
	case errors.Is(err, failover.ErrBreakerOpen):
		return "breaker_open"
	case errors.Is(err, failover.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	case errors.Is(err, sluice.ErrInvalidKey), errors.Is(err, sluice.ErrInvalidCost),
		errors.Is(err, sluice.ErrExceedsCapacity), errors.Is(err, sluice.ErrDuplicateCheck),
		errors.Is(err, sluice.ErrInvalidPolicy):
		return causeInvalid
	}
	return "store"
}
