// Package failover decides what happens when the store holding the shared
// state cannot answer. A rate limiter in front of every request must not
// stall when Redis stalls, and what it does instead is a product decision:
//
//	FailOpen    admit the request, uncounted (the default: an outage of the
//	            limiter does not become an outage of the API)
//	FailClosed  deny it, with an error that says why (for limits that protect
//	            something more valuable than availability)
//	FailLocal   decide on an in-process memory store with the same policies,
//	            optionally each divided by the number of nodes, so the limit
//	            holds approximately while Redis is away
//
// A Store wraps the primary store (typically a redisstore.Store) with three
// mechanisms:
//
//   - a per-call timeout (DefaultTimeout), so a slow or frozen Redis costs a
//     bounded wait, never a hang;
//   - a circuit breaker: after a run of consecutive failures it stops calling
//     the primary for a cool-down, so a dead Redis costs no timeout at all;
//     then one call probes it, and a success closes the breaker again;
//   - the fail policy, applied to every call the primary could not decide.
//
// Decisions made by the fail policy carry Result.Degraded; under FailClosed
// they are errors wrapping ErrUnavailable and the cause. Errors that are the
// caller's (an invalid key or cost) pass through unchanged, and a caller's
// own cancellation is never counted against the store.
//
// What is lost while degraded: admissions under FailOpen and FailLocal are
// not recorded in the primary, so when it comes back its counts are lower
// than the traffic that passed; local counts are not copied back.
package failover
