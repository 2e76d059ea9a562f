package sluice

import "time"

// Result is a store's answer to one request. Its meaning is the same for every
// algorithm and every store.
type Result struct {
	// Allowed: the request was admitted and its cost consumed. A peek (cost 0)
	// consumes nothing and is allowed when a request of one unit would be:
	// when something is left. A charge (Charger) is allowed when its cost
	// fitted what was left.
	Allowed bool
	// Limit is the policy's L.
	Limit int64
	// Remaining is how many units could still be admitted now, after this
	// decision: never negative. After a charge it is what is left, negative
	// when the key owes units.
	Remaining int64
	// RetryAfter is 0 when allowed. When denied, it is the smallest wait after
	// which the same request is admitted if nothing else happens, exact to the
	// microsecond: admitted at now+RetryAfter, denied 1µs earlier. For a peek,
	// and for a charge that did not fit, the request is one of one unit.
	RetryAfter time.Duration
	// ResetAfter is the time until the key is back to its initial, unused state
	// if nothing else happens.
	ResetAfter time.Duration
	// Delay is set by LeakyBucket only: how long the admitted request waits in
	// the queue before it may proceed. Departures are spaced at the constant rate.
	Delay time.Duration
	// Degraded is set when the store holding the shared state could not
	// decide and a fail policy did instead (see package failover): the
	// request was admitted without being counted (fail open), or decided on
	// a local store that does not see other nodes' traffic (fail local).
	// Stores that hold the state themselves never set it.
	Degraded bool
}

// Quota is one limit's part of a decision: the policy that was applied and
// the Result it gave. Front ends describe a decision to clients by its quotas
// (the RateLimit-Policy and RateLimit header fields of package httplimit, the
// metadata of package grpclimit).
type Quota struct {
	// Policy is the policy the request was decided under.
	Policy *Policy
	// Result is what that policy decided for the request.
	Result Result
}
