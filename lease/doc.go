// Package lease decides locally from quota leased from a shared store, with a
// bound on the overshoot that is written down and exposed (Store.Bound).
//
// A lease.Store wraps a remote sluice.Store (memory or Redis) that implements
// sluice.Reserver. A key asking fewer than three times per TTL d on a node is
// decided by one store call per request, as without leases (only its rate is
// kept, in a bounded table). Once it asks more, the node reserves a batch of
// units in one store call — as many as asked, or what is left — and admits
// later requests from the batch without asking the store, until the batch is
// spent, its TTL d ends, or (fixed_window) its window ends. The batch size is
// the key's expected demand over the lease's life (the rate it spent its
// previous lease at, or its request rate; while the key has been seen for
// less than d, at most what it asked so far) and, for a fixed window, at most a
// quarter of what the store had left, so near the limit leases shrink to
// single units; a key that cools gets smaller leases, then none. Unused units
// are given back when the lease ends or the store is closed, if the key's
// leases saved at least that call and the refund can still restore a unit
// (a fixed window's also while the window may reach its limit); background
// renewals are paid for the same way. A bucket node whose reservation comes back short waits locally for
// the rest to refill (backing off while others take it first), so a
// saturated node makes one store call per lease, not one per unit. A lease
// about to run out (within twice a reservation's latency, at the node's rate)
// is renewed in the background, so steady decisions never wait for the store;
// the renewal is a reservation like any other and the bound covers it.
//
// The bound (docs/algorithms.md, "Leases: local decisions with a bound"): a
// fixed_window lease never outlives its window, so it adds no overshoot; a
// token_bucket or gcra lease spent up to d after its reservation lets at most
// d/T more units pass in any interval, a ratio of 1 + d/(B·T) to the policy's
// own guarantee. The default d is B·T/20 (P/20 when B = L): a bound of 1.05.
// sliding_window, sliding_log and leaky_bucket are not leased: every request
// goes to the remote store, and their bound is 1. Nor are concurrency slots:
// every acquisition and release goes to the remote store (a sluice.SlotStore).
//
// Results of leased decisions are coarser than the contract's exact ones:
// Remaining is the node's unspent lease plus what the store had left at the
// last reservation (refilled by elapsed time for the buckets), and a denial
// the node remembers (RetryAfter) does not see units other nodes give back
// in the meantime — it can only deny longer, never admit more. A request
// under a changed policy (same name and algorithm, new limit, period or
// burst) gives the key's lease back and forgets its denial first, so the
// new numbers apply from that request on.
//
// Multi-request batches (DecideAll) go to the remote store, which counts the
// leased units as consumed, so all-or-nothing holds exactly.
//
// A peek (cost 0) at a key whose lease holds a unit is answered from the
// lease, allowed: the store, which counts leased units as consumed, would
// deny a request this node admits. Otherwise the store answers it.
//
// Charges (sluice.Charger) spend what the key's lease holds first, with no
// store call when it covers them, and charge only the rest to the remote
// store, which records it even beyond the limit. The bound does not change:
// units a charge takes from a lease are spent within its TTL like any
// admission from it, and the rest is counted in the store at once. A key
// charged into debt gets no new lease until time has repaid it.
//
// When the remote store fails, a node keeps spending its current lease and
// returns the store's error once it needs a new one. Wrap the remote store in
// a fail policy (lease.New(failover.New(redis))) so that only the calls that
// reach it are timed, counted and broken: decisions from a lease never touch
// it, and once the lease is spent the fail policy decides (its degraded
// results pass through, and install no lease). A node that dies without Close
// strands at most its leases: under-admission, never over-admission.
package lease
