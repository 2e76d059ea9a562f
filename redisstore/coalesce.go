package redisstore

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// Group commit: while a call to a Redis node is in flight, the Decides (and
// the DecideAll sets) for that node queue up, and when it returns the queue
// goes as the next call, one batch script (decide_batch in batch.lua) that
// decides every item at one instant. A lone decision goes at once, so light
// load adds no latency; under load Redis pays its per-call costs (command
// dispatch, TIME, the reply, the socket) once per batch instead of once per
// decision, and a hot key is read and written once per batch. No request
// waits for more than the call before it and its own.
//
// Order: items on one key are decided in arrival order, except that the
// single requests on one (policy, key) are decided one after the other at the
// place of the first of them. Every item of a batch was pending at once, so
// that is an order they could have had alone.

// maxBatch bounds the requests one call decides (a larger DecideAll set goes
// alone), so that a call stays short.
const maxBatch = 64

// Partitioner is implemented by Runners that know where keys live: keys of
// one partition can always share a script (Colocated). The Store keeps one
// queue per partition — per Redis, per Cluster slot, per shard. With a Runner
// that is no Partitioner, or for a key whose partition it cannot tell, only
// requests on one key share calls.
type Partitioner interface {
	// Partition returns the partition of key, false when it cannot tell.
	Partition(key string) (uint64, bool)
}

// queueKey names a queue: a partition, or one Redis key.
type queueKey struct {
	part uint64
	key  string // set when the Runner cannot tell key's partition
}

// queues holds a queue per queueKey with a call in flight.
type queues struct {
	mu sync.Mutex
	m  map[queueKey][]*waiter
}

// waiter is one queued item: a Decide's request, a DecideAll set (all), a
// Reserve's or a Release's (op).
type waiter struct {
	ctx     context.Context
	reqs    []sluice.Request
	keys    []string
	all     bool
	done    chan struct{} // closed when the results are set; nil for a call's first item
	results []sluice.Result
	err     error
	one     [1]sluice.Request // a Decide's reqs
	oneKey  [1]string         // and keys
	oneRes  [1]sluice.Result  // and results
	op      op
	upTo    int64              // a reservation's most units
	res     sluice.Reservation // a reservation's answer; a release's, to give back from
	held    []int64            // a hold's reply (replyLen values) or a dry run's (batchStride), set by the call
}

// op is what a waiter asks for. Every kind shares the queues and the calls:
// a lease's reservations and releases ride with the decisions, so a node has
// one call in flight per partition, and Redis pays its per-call costs once
// for all of them.
type op uint8

const (
	opDecide  op = iota // a Decide, or a DecideAll set
	opReserve           // a Reserve of reqs[0].Cost to upTo units (reserve.go)
	opRelease           // a Release of reqs[0].Cost units of res
	opCharge            // a Charge, or a ChargeAll set on one node (charge.go), queued apart
	opHold              // a Decide replying its refunds' refs too (held): a spread set's reservation (crossslot.go)
	opDry               // a Decide that writes nothing, replying a peek's view (held): a spread set's dry run (crossslot.go)
)

// submit decides w in the queue of its node: at once if no call is in flight
// there, else in the call after the one in flight.
func (s *Store) submit(w *waiter) error {
	qk, ok := s.queueOf(w.keys)
	if !ok {
		s.runBatch(w.ctx, []*waiter{w})
		return w.err
	}
	q := s.queuesOf(w)
	if q.join(qk, w) {
		s.runBatch(w.ctx, []*waiter{w})
		s.handOff(q, qk)
	}
	return w.wait()
}

// join queues ws behind the call in flight on qk and returns false, or, with
// none in flight there, marks one and returns true: the caller then makes
// the call of ws (runBatch) and ends it (handOff).
func (q *queues) join(qk queueKey, ws ...*waiter) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	queue, busy := q.m[qk]
	if !busy {
		if q.m == nil {
			q.m = map[queueKey][]*waiter{}
		}
		q.m[qk] = nil // a call is in flight: later items queue
		return true
	}
	for _, w := range ws {
		if w.all {
			// The caller's slice may be reused once it returns: the batch
			// must not read it after that.
			w.reqs = append([]sluice.Request(nil), w.reqs...)
		}
		w.done = make(chan struct{})
	}
	q.m[qk] = append(queue, ws...)
	return false
}

// setOne makes w a waiter of the one request req on key, its slices in
// itself.
func (w *waiter) setOne(req sluice.Request, key string) {
	w.one[0], w.oneKey[0] = req, key
	w.reqs, w.keys = w.one[:], w.oneKey[:]
}

// wait returns w's error once a call has decided it: at once when the
// caller made that call itself, else when the call it queued for returns or
// its context ends, whichever comes first.
func (w *waiter) wait() error {
	if w.done == nil {
		return w.err
	}
	select {
	case <-w.done:
		return w.err
	case <-w.ctx.Done():
		// The batch may still decide this item: an error for a request
		// that was counted errs on the safe side.
		return w.ctx.Err()
	}
}

// queuesOf returns the queues w joins: charges share calls with each other
// only (charge_batch); decisions, reservations and releases share theirs.
func (s *Store) queuesOf(w *waiter) *queues {
	if w.op == opCharge {
		return &s.cq
	}
	return &s.q
}

// queueOf returns the queue of an item on keys, false if it has none (a set
// whose partition the Runner cannot tell goes alone).
func (s *Store) queueOf(keys []string) (queueKey, bool) {
	if s.part == nil {
		return queueKey{key: keys[0]}, len(keys) == 1
	}
	p, ok := s.part.Partition(keys[0])
	if !ok {
		return queueKey{key: keys[0]}, len(keys) == 1
	}
	for _, k := range keys[1:] {
		if q, ok := s.part.Partition(k); !ok || q != p {
			return queueKey{}, false
		}
	}
	return queueKey{part: p}, true
}

// handOff ends a call on qk: the queue behind it, up to maxBatch requests, is
// decided by the next call, on a goroutine of its own so that every waiter
// returns when its own context ends; with no queue, qk has no call in flight
// any more.
func (s *Store) handOff(q *queues, qk queueKey) {
	q.mu.Lock()
	defer q.mu.Unlock()
	queue := q.m[qk]
	if len(queue) == 0 {
		delete(q.m, qk)
		return
	}
	n, size := 1, len(queue[0].reqs)
	for n < len(queue) && size+len(queue[n].reqs) <= maxBatch {
		size += len(queue[n].reqs)
		n++
	}
	batch := queue[:n:n]
	q.m[qk] = queue[n:]
	go func() {
		ctx, cancel := batchContext(batch)
		s.runBatch(ctx, batch)
		cancel()
		s.handOff(q, qk)
	}()
}

// batchContext carries the first waiter's values, none of the waiters'
// cancellations, and the latest of their deadlines (none if one has none:
// the store's own timeout still bounds the call). A waiter that queued last
// must not fail early because another's deadline came first, nor every
// waiter because one of them went away.
func batchContext(batch []*waiter) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(batch[0].ctx)
	var latest time.Time
	for _, w := range batch {
		dl, ok := w.ctx.Deadline()
		if !ok {
			return base, func() {}
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	return context.WithDeadline(base, latest)
}

// runBatch decides batch in one call and sets every waiter's results or
// error. A lone item goes by its own function (main.lua's decide_one and
// refund, reserve.lua's reserve_one), which costs Redis less than a batch of
// one.
func (s *Store) runBatch(ctx context.Context, batch []*waiter) {
	if batch[0].op == opCharge {
		s.runCharges(ctx, batch)
		return
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if w := batch[0]; len(batch) == 1 && !w.all {
		s.runOne(ctx, w)
		s.finish(batch, batch)
		return
	}
	b := s.encodeBatch(batch)
	reply := make([]int64, b.replyLen)
	setResults(b.order, b.script, reply, s.run.Run(ctx, b.script, b.keys, b.args, reply))
	s.finish(b.order, batch)
}

// setResults gives each waiter of order, in turn, its answer from reply
// (waiter.read), or the call's error.
func setResults(order []*waiter, script *Script, reply []int64, err error) {
	off := 0
	for _, w := range order {
		if err != nil {
			w.err = scriptError(script, err)
			continue
		}
		off = w.read(reply, off)
	}
}

// runOne makes w's call alone.
func (s *Store) runOne(ctx context.Context, w *waiter) {
	req := w.reqs[0]
	var reply [replyLen]int64
	script := scriptFor(req.Policy.Algorithm)
	var args []string
	switch w.op {
	case opReserve:
		script = scripts[algoCode(req.Policy.Algorithm)+reserveSuffix]
		// The same ARGV as a refund, with upTo where the refund has ref1.
		args = s.requestArgs(modeReserve, req, s.now(), true, w.upTo, 0)[:8]
	case opRelease:
		args = s.requestArgs(modeRefund, req, s.now(), true, w.res.Ref1, w.res.Ref2)
	case opDry:
		args = s.requestArgs(modeDry, req, s.now(), false, 0, 0)
	default:
		args = s.requestArgs(modeWrite, req, s.now(), false, 0, 0)
	}
	if err := s.run.Run(ctx, script, w.keys, args, reply[:]); err != nil {
		w.err = scriptError(script, err)
		return
	}
	w.read(reply[:], 0)
}

// read sets w's answer from a call's reply at off, and returns the offset of
// the next item's.
func (w *waiter) read(reply []int64, off int) int {
	switch w.op {
	case opReserve:
		w.res = reservation(w.reqs[0].Policy, reply[off:off+replyLen])
		return off + replyLen
	case opHold:
		copy(w.held, reply[off:off+replyLen])
		return off + replyLen
	case opDry:
		copy(w.held, reply[off:off+batchStride])
		return off + batchStride
	case opRelease:
		return off
	}
	if w.results == nil {
		w.results = make([]sluice.Result, len(w.reqs))
	}
	for i, r := range w.reqs {
		w.results[i] = result(r.Policy, reply[off:])
		off += batchStride
	}
	return off
}

// finish ends a call: the test's hook sees the items in the order the call
// decided them, then every queued waiter of batch returns.
func (s *Store) finish(order, batch []*waiter) {
	if s.onBatch != nil {
		s.onBatch(order)
	}
	for _, w := range batch {
		if w.done != nil {
			close(w.done)
		}
	}
}
