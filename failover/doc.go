// Package failover decides what happens when the store holding the shared
// state cannot answer. A rate limiter in front of every request must not
// stall when Redis stalls, and what it does instead is a product decision:
//
//	FailLocal   decide on an in-process memory store with the same policies,
//	            each divided by the number of nodes given with WithNodes, so
//	            the limit holds approximately while Redis is away (the
//	            default; without WithNodes nothing is divided and N nodes
//	            admit N times the limit)
//	FailClosed  deny it, with an error that says why (for limits that protect
//	            something more valuable than availability)
//	FailOpen    admit the request, uncounted: unbounded while Redis is away
//
// A Store wraps the primary store (typically a redisstore.Store) with three
// mechanisms:
//
//   - a per-call timeout that adapts to the latency of recent successful
//     calls within [DefaultMinTimeout, DefaultMaxTimeout], and is stretched
//     when its own timer fires late (this process, not the store, was
//     stalled); WithTimeout fixes it instead; a caller that waits before
//     its call (package lease) marks the decision with MarkStart, and the
//     maximum then bounds the wait and the calls together;
//   - a circuit breaker that opens on a failure rate over the last calls
//     (DefaultFailureRate of DefaultMinCalls, failures of the last
//     DefaultWindow), counting the failures of calls in flight together as
//     one, so one stall of the store is one failure; after a cool-down a few
//     probes go through, and their success closes it; with
//     WithBreakerPerNode, one per node (shard or Cluster master), so one node
//     down sends only its own keys to the fail policy;
//   - the fail policy, applied to every call the primary could not decide.
//
// Decisions made by the fail policy carry Result.Degraded; under FailClosed
// they are errors wrapping ErrUnavailable and the cause. Only FailOpen ever
// admits a request uncounted. Errors that are the caller's (an invalid key or
// cost) pass through unchanged, and a caller's own cancellation is never
// counted against the store.
//
// Concurrency slots (sluice.SlotStore) follow the same fail policy; a
// slot's token records where it was acquired, so that its release goes
// there (see Store.AcquireSlot).
//
// What is lost while degraded: admissions under FailOpen and FailLocal are
// not recorded in the primary, so when it comes back its counts are lower
// than the traffic that passed; local counts are not copied back.
package failover
