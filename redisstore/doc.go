// Package redisstore is Sluice's Redis store: the state of every (policy, key)
// lives in Redis or Redis Cluster, shared by every process that uses it, and
// decisions are made by Lua functions run atomically by the server — one
// round trip, shared by the decisions queued meanwhile (see Batching).
//
// # Functions or scripts
//
// On Redis 7 and later the store loads its Lua once per server as a function
// library (FUNCTION LOAD, on every master of a Cluster) and decides with one
// FCALL, which runs only the decision's own function. Where Functions are
// unavailable — Redis before 7, FUNCTION refused by an ACL (NOPERM), renamed
// away or disabled by a managed service, or FUNCTION LOAD failing with any
// other error of the server (another Redis flavour, a function name another
// library took) — it runs the same Lua as scripts: EVALSHA, with EVAL when
// the server has lost its script cache; every call then also re-runs the
// script's definitions, which costs Redis more CPU per decision. The choice
// is made by the first call that reaches Redis (or Store.Mode, which a
// service logs at start-up with Store.ModeReason) and kept; only a server
// that cannot be reached, or answers that it is loading, busy or failing
// over, leaves it to the next call. A server that loses the library (FUNCTION FLUSH, a
// restart with no data, a new Cluster master) gets it again on the next call
// that misses it, which is then retried once. The library's name carries a
// hash of its code (sluice_<hash>), so versions of Sluice sharing one Redis
// each run their own; FUNCTION DELETE removes an old one.
//
//	store, err := redisstore.Open("redis://localhost:6379")
//	...
//	defer store.Close()
//	lim, err := sluice.New(store, sluice.Policy{Name: "api", Algorithm: sluice.GCRA, Limit: 100, Period: time.Minute})
//
// Open takes a URL (one server, TLS, a Unix socket, a Cluster, Sentinel,
// or independent servers sharded by key: see ShardedRunner) and builds a
// rueidis client per server; New takes a rueidis.Client the caller already has;
// package redisstore/goredis runs the same scripts on a go-redis client.
// NodeOf names the server (shard or Cluster master) that holds a key, for a
// circuit breaker per node (failover.WithBreakerPerNode); on a Cluster the
// store reads the slot owners itself for that, with CLUSTER SHARDS (CLUSTER
// SLOTS on a server that refuses SHARDS), every second while in use and at
// once after a call fails in a way that says the map may have changed: a
// MOVED reply that reaches the store, CLUSTERDOWN, TRYAGAIN or no reply.
//
// The scripts compute exactly what sluice.Decide computes, with the same
// integer formulas: Lua's numbers are doubles, exact for the integers below
// 2^53 that sluice.Policy.Validate guarantees, and every division is the
// truncated integer division Go does.
//
// # Time
//
// By default a script reads the server's TIME, in microseconds: the clocks of
// the clients never matter, so no two clients can disagree on which window a
// request falls into. WithClock passes the client's time instead (tests use
// it to control time); then the clients' clocks must agree. A time earlier
// than the stored state, after a fail-over to a replica whose clock is behind
// for example, counts as no time passing, as in sluice.Decide.
//
// # Keys
//
// One Redis key holds the state of one (policy, key):
//
//	PREFIX{POLICY:KEY}:ALG    e.g.  sluice:{api:alice}:gc
//
// PREFIX is "sluice:" unless WithPrefix says otherwise. The braces make
// "POLICY:KEY" the Cluster hash tag, so a key's state stays in one slot. In
// KEY, '%', '{' and '}' are written %25, %7B and %7D, so that no user key can
// close the tag early or collide with another; policy names cannot contain
// them. ALG names the algorithm, outside the tag: a policy that changes
// algorithm finds no state and starts fresh, as in the memory store. The
// state itself is small: a string of a zero byte and one to three
// little-endian doubles (each an integer, exact below 2^53), read and written
// by Lua's struct library without any text formatting, or a list for the
// sliding log:
//
//	fixed_window    fw  string (LAST, COUNT)      last admission µs, units in its window
//	sliding_window  sw  string (LAST, CUR, PREV)  last admission µs, its window's units, the window before's
//	token_bucket    tb  string (LAST, MISSING)    last refill µs, missing credit µs
//	gcra            gc  string (TAT, TOL)         theoretical arrival time µs, the admitting policy's B·T µs
//	leaky_bucket    lb  string (TAT, TOL)         the queue tail's TAT µs, the admitting policy's B·T µs
//	sliding_log     sl  list of (TS, COST, CUM)   one per admission, oldest first
//	concurrency     cc  sorted set of tokens      one per slot held, scored by its acquisition µs
//
// Earlier versions of Sluice wrote the strings as decimal text ("LAST:COUNT"
// and so on); such a state is still read, and rewritten packed by the next
// admission (a GCRA or leaky-bucket state without TOL reads as the current
// policy's tolerance). Those versions cannot read the packed states, so a rolling
// upgrade that runs both on one Redis makes the old processes fail (their
// fail policy decides) on keys the new ones have written: upgrade them all
// at once, or with a new WithPrefix.
//
// A sliding-log entry carries CUM, the running total of all costs pushed so
// far: the sum of any run of entries is a difference of two CUMs, so a
// decision reads a handful of entries (a binary search for the oldest live
// one, and on denial for the one whose departure admits the request) however
// long the log is, without a second key for the sum.
//
// # Expiry
//
// Only an admission or a charge writes: denials and peeks change nothing. Each write sets
// the key to expire when its state is back to initial (ResetAfter after the
// decision, or later if the clock ran backwards): SET … PXAT (SET and
// PEXPIREAT in the scripts, which also serve Redis < 6.2) on the server's
// clock, never earlier — forgetting state early would admit more than the
// limit — and less than a millisecond later. So idle keys cost nothing. With a
// client clock the key lives until the later of that instant and its reset
// time read as a Unix time, which covers a client clock behind the server's.
// A refund (below) that leaves a key initial deletes it.
//
// # Batching: group commit
//
// Decisions share calls. While a call to a Redis node is in flight, the
// Decides for keys on that node — and the DecideAll sets whose keys all live
// there — queue up in the process; when the call returns, the queue (up to 64
// requests) goes as the next call, one batch function that decides every item
// at one instant, each getting exactly the result it would have got alone in
// that order. A lone decision goes at once, so light load adds no latency;
// under load a queued Decide waits for the call ahead of it, so its latency is
// up to two calls. Redis then pays its per-call costs (command dispatch, TIME,
// the reply, the socket) once per batch, reads the string states of the
// batch's keys with one MGET, and reads and writes a hot key once per batch
// however many of the batch's requests it decides: at 64 callers a few calls
// per hundred decisions. Items on one key are decided in arrival order, the
// single requests on one (policy, key) one after the other at the place of
// the first (every item of a batch was pending at once, so that is an order
// they could have had).
//
// Reservations and releases (Reserve and Release: a lease's batches, their
// renewals and the units given back) queue with the decisions and share
// their calls: a batch makes each as it would be made alone, in its place, at
// the call's instant. A node with leases thus has one call in flight per
// node, not one for its decisions and another for its leases.
//
// Charges (Charge, and ChargeAll sets whose keys share a node) queue apart,
// in a queue of their own per node, and go as one charge_batch call; a
// ChargeAll set spread over several nodes sends each charge to its node,
// pipelined, since charges are never all or nothing.
//
// # Charges
//
// A charge (sluice.Charger) records usage that already happened, even beyond
// the limit, with the Go core's integer math (charge_*.lua): the count, the
// missing credit or the TAT grows past the limit, up to the caps of
// docs/semantics.md, and the key lives until its ResetAfter, which covers the
// debt. A sliding log that holds L live entries adds a charge to its newest
// entry, which moves to the charge's instant; before the log's running totals
// (CUM) would pass 2^52 they are taken back to start from the oldest live
// entry, so that they stay exact.
//
// There is one queue per node: per Redis server, per shard of a sharded store,
// and per hash slot on a Cluster (a function's keys must share a slot there,
// so on a Cluster it is mostly requests on one key that share calls). A
// Runner from elsewhere batches the same way if it implements Partitioner,
// else only requests on one key share calls. A batch's call runs until the
// latest of its members' deadlines; each waiter returns at its own. A failed
// call fails every member with its error.
//
// # Several limits at once
//
// DecideAll admits all of its requests or none. How depends on where the keys
// live:
//
//   - On a single Redis (or one behind Sentinel), and on a Cluster when every
//     key hashes to one slot, the batch function decides every request, writes
//     them all only if all are admitted, and otherwise answers each key as a
//     peek sees it, denied, with the largest RetryAfter: exactly the memory
//     store's answer, atomically. A prefix holding a hash tag, such as
//     "{app}:", puts every key in one slot, at the price of all the load on
//     one node.
//   - On a Cluster with keys in several slots no script can see them all.
//     The store first decides every request in a dry run that writes
//     nothing, every node at once; if any denies, the set is denied with the
//     largest RetryAfter (the common case under load: no writes). Otherwise it
//     reserves the requests one by one in key order, and if one is denied
//     after all — another client was quicker — refunds the reservations made
//     so far and denies the set. The dry runs, the reservations and the
//     refunds queue with the Decides of their keys' nodes and share their
//     calls (Batching), as a lone Decide does (a set of more than 64 keys
//     makes its dry run apart, a call per key, pipelined). Each node decides
//     on its own TIME. A refund undoes exactly the reserved cost: the window count or
//     the log entry goes, and a bucket's TAT or missing credit moves back by
//     cost·T, less any refill the units may have absorbed meanwhile, so that a
//     refund never leaves a bucket fuller than it would be without the
//     reservation. A race can thus deny a set that a single script would
//     have admitted, and a reservation briefly holds units others may be
//     denied, but no limit ever admits more than it allows.
//
// # Failures
//
// Each call is bounded by WithTimeout (100ms by default) on top of the
// caller's context. An error means the decision is unknown: the script may or
// may not have run. Refunds run even when the call's context is done, under a
// timeout of their own; a refund that fails leaves its units consumed until
// the key expires, which under-admits and never over-admits.
package redisstore
