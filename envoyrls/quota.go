package envoyrls

import (
	"context"

	"google.golang.org/protobuf/types/known/structpb"
)

// Quota mode (envoyproxy/ratelimit's quota_mode: true on a descriptor).
//
// A quota-mode limit is a soft one. It is decided and counted like a shadow
// limit (config sets Shadow on it), so it never denies the request by
// itself; when it cannot admit its cost, its descriptor's status is
// OVER_LIMIT while the request stays OK, and the response's dynamic metadata
// says so: quotaModeEnabled is true when a quota-mode limit matched, and
// quotaModeViolations lists the indices of the descriptors whose quota-mode
// limit is exhausted. Envoy can route on it (to a fallback backend, say).
// When every quota-mode limit of the request is exhausted, though, the
// request is denied, as envoyproxy/ratelimit does: there is no quota left
// anywhere. The quotas are looked at before deciding, so such a request is
// denied without charging anything; only one that races another for the last
// units can find them gone after its enforced limits were charged.

// Metadata field names, as envoyproxy/ratelimit sends them.
const (
	metaQuotaEnabled    = "quotaModeEnabled"
	metaQuotaViolations = "quotaModeViolations"
)

// quotaExhausted reports whether quota-mode limit l could not admit its
// cost. allowed says whether the enforced limits admitted the request: the
// quota-mode checks were then charged, and Allowed is their answer; else
// they were only peeked at.
func (sc *scratch) quotaExhausted(l *limitRef, allowed bool) bool {
	switch l.kind {
	case kindZeroLimit:
		return l.cost > 0
	case kindLive:
		i := l.check
		switch {
		case sc.costs[i] == 0:
			return false
		case sc.flags[i]&flagOverCapacity != 0:
			return true
		case allowed:
			return !sc.results[i].Allowed
		default:
			return sc.results[i].Remaining < sc.costs[i]
		}
	}
	return false
}

// flaggedExhausted reports whether quota-mode limit l was found exhausted.
func (sc *scratch) flaggedExhausted(l *limitRef) bool {
	if l.kind == kindLive {
		return sc.flags[l.check]&flagQuotaExhausted != 0
	}
	return l.kind == kindZeroLimit && l.cost > 0
}

// applyQuota flags the exhausted quota-mode checks and reports whether the
// request has quota-mode limits (any) and whether all of them are exhausted.
func (sc *scratch) applyQuota(allowed bool) (any, all bool) {
	all = true
	for i := range sc.limits {
		l := &sc.limits[i]
		if l.policy == nil || !l.policy.QuotaMode || l.kind == kindReplaced {
			continue
		}
		any = true
		if !sc.quotaExhausted(l, allowed) {
			all = false
			continue
		}
		if l.kind == kindLive {
			sc.flags[l.check] |= flagQuotaExhausted
		}
	}
	return any, any && all
}

// quotaMetadata is the response's dynamic metadata for a request with
// quota-mode limits.
func (sc *scratch) quotaMetadata() *structpb.Struct {
	var violations []*structpb.Value
	for i, bi := range sc.best {
		if bi < 0 {
			continue
		}
		if l := &sc.limits[bi]; l.policy != nil && l.policy.QuotaMode && sc.flaggedExhausted(l) {
			violations = append(violations, structpb.NewNumberValue(float64(i)))
		}
	}
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		metaQuotaEnabled:    structpb.NewBoolValue(true),
		metaQuotaViolations: structpb.NewListValue(&structpb.ListValue{Values: violations}),
	}}
}

// quotaGone reports whether the request has quota-mode limits and none of
// them can admit its cost now, by peeking at each. A store error is not an
// answer: the decision that follows meets it again.
func (s *Server) quotaGone(ctx context.Context, sc *scratch) bool {
	store := s.svc.TracedStore()
	any := false
	for i := range sc.limits {
		l := &sc.limits[i]
		if l.policy == nil || !l.policy.QuotaMode || l.kind == kindReplaced {
			continue
		}
		any = true
		switch l.kind {
		case kindZeroLimit:
			if l.cost == 0 {
				return false
			}
		case kindLive:
			j := l.check
			if sc.flags[j]&flagOverCapacity != 0 {
				continue
			}
			if sc.costs[j] == 0 {
				return false
			}
			c := sc.checks[j]
			c.Cost = 0
			r, err := store.Decide(ctx, reqOf(c))
			if err != nil || r.Remaining >= sc.costs[j] {
				return false
			}
		}
	}
	return any
}
