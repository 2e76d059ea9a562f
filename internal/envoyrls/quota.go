package envoyrls

import "github.com/sluicehq/sluice/internal/decide"

// Quota mode (envoyproxy/ratelimit's quota_mode: true on a descriptor).
//
// A quota-mode limit is a soft one. It is decided and counted like a shadow
// limit (config sets Shadow on it), so it never denies the request by
// itself; when it cannot admit its cost, its descriptor's status is
// OVER_LIMIT while the request stays OK. When every quota-mode limit of the
// request is exhausted, though, the request is denied, as
// envoyproxy/ratelimit does: there is no quota left anywhere. The engine
// decides so (engine.Request.QuotaMode; the rule is package decide's): the
// quotas are looked at before deciding, so such a request is denied without
// charging anything; only one that races another for the last units can find
// them gone after its enforced limits were charged. As envoyproxy/ratelimit
// since it dropped them, the response carries no quotaModeEnabled or
// quotaModeViolations metadata.

// over reports whether check i makes its descriptors OVER_LIMIT: an
// enforced check that denied the request, or a quota-mode one without quota
// left. A shadow check never does: it is not enforced.
func (sc *scratch) over(i int32) bool {
	f := sc.checks[i].Flags
	switch {
	case f&decide.Exhausted == 0:
		return false
	case f&decide.Quota != 0:
		return true
	case f&decide.Shadow != 0:
		return false
	}
	return !sc.req.Allowed && !sc.req.QuotaDenied
}
