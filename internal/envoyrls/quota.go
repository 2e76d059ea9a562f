package envoyrls

import (
	"context"
)

// Quota mode (envoyproxy/ratelimit's quota_mode: true on a descriptor).
//
// A quota-mode limit is a soft one. It is decided and counted like a shadow
// limit (config sets Shadow on it), so it never denies the request by
// itself; when it cannot admit its cost, its descriptor's status is
// OVER_LIMIT while the request stays OK. When every quota-mode limit of the
// request is exhausted, though, the request is denied, as
// envoyproxy/ratelimit does: there is no quota left anywhere. The quotas are
// looked at before deciding, so such a request is denied without charging
// anything; only one that races another for the last units can find them
// gone after its enforced limits were charged. As envoyproxy/ratelimit since
// it dropped them, the response carries no quotaModeEnabled or
// quotaModeViolations metadata.

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

// applyQuota flags the exhausted quota-mode checks and reports whether the
// request has quota-mode limits and all of them are exhausted.
func (sc *scratch) applyQuota(allowed bool) (noneLeft bool) {
	any, all := false, true
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
	return any && all
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
