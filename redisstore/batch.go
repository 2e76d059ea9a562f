package redisstore

import (
	"strconv"

	"github.com/sluicehq/sluice"
)

// encodedBatch is one call of decide_batch (batch.lua).
type encodedBatch struct {
	script   *Script
	keys     []string
	args     []string
	replyLen int       // the values it replies
	order    []*waiter // the items, in the order the call decides them
}

// batchInstant writes a batch's first argument: the one instant of the whole
// batch, or with no Clock, "" for the script to read Redis TIME once.
func (s *Store) batchInstant(a *argBuilder) {
	if s.clock != nil {
		a.int(s.now())
	} else {
		a.str("")
	}
}

// encodeBatch lays out batch as decide_batch's KEYS and ARGV: single
// requests on one (policy, key) as one run at the place of the first, lone
// requests of one cost on keys of their own as one record, a policy's
// numbers only when it differs from the previous run's, each DecideAll set
// as one all-or-nothing record, each reservation as one (after its policy,
// when that differs from the previous record's), and each release and dry
// run as one.
func (s *Store) encodeBatch(batch []*waiter) encodedBatch {
	e := encodedBatch{order: arrange(batch)}
	var a argBuilder
	s.batchInstant(&a)
	alg, mixed := batch[0].reqs[0].Policy.Algorithm, false
	var last *sluice.Policy
	for i := 0; i < len(e.order); {
		w := e.order[i]
		for _, r := range w.reqs {
			mixed = mixed || r.Policy.Algorithm != alg
		}
		switch w.op {
		case opReserve: // a lease's: its policy mostly that of the record before
			if p := w.reqs[0].Policy; p != last {
				a.policy(p)
				last = p
			}
			a.str("u")
			a.int(w.reqs[0].Cost)
			a.int(w.upTo)
			e.keys = append(e.keys, w.keys[0])
			e.replyLen += replyLen
			i++
			continue
		case opHold, opDry: // a spread set's steps: a hold replies its refs too
			code, n := "h", replyLen
			if w.op == opDry {
				code, n = "d", batchStride
			}
			a.str(code)
			a.policy(w.reqs[0].Policy)
			a.int(w.reqs[0].Cost)
			e.keys = append(e.keys, w.keys[0])
			e.replyLen += n
			i++
			continue
		case opRelease:
			a.str("r")
			a.policy(w.reqs[0].Policy)
			a.int(w.reqs[0].Cost)
			a.int(w.res.Ref1)
			a.int(w.res.Ref2)
			e.keys = append(e.keys, w.keys[0])
			i++
			continue
		}
		e.replyLen += batchStride * len(w.reqs)
		if w.all {
			a.str("a")
			a.int(int64(len(w.reqs)))
			for _, r := range w.reqs {
				a.policy(r.Policy)
				a.int(r.Cost)
			}
			e.keys = append(e.keys, w.keys...)
			i++
			continue
		}
		j := i + 1
		for j < len(e.order) && sameRun(w, e.order[j]) {
			j++
		}
		if p := w.reqs[0].Policy; p != last {
			a.policy(p)
			last = p
		}
		if k := lone(e.order[i:]); k > 1 {
			a.str("m")
			a.int(int64(k))
			a.int(w.reqs[0].Cost)
			e.replyLen += batchStride * (k - 1)
			e.keys = append(e.keys, w.keys[0])
			for _, x := range e.order[i+1 : i+k] {
				e.keys = append(e.keys, x.keys[0])
			}
			i += k
			continue
		}
		if j == i+1 && w.reqs[0].Cost >= 0 {
			a.int(-w.reqs[0].Cost) // one request: its cost, negated
		} else { // (a negative cost, which the Limiter refuses, must not read as a count)
			a.int(int64(j - i))
			for _, x := range e.order[i:j] {
				a.int(x.reqs[0].Cost)
			}
		}
		e.replyLen += batchStride * (j - i - 1)
		e.keys = append(e.keys, w.keys[0])
		i = j
	}
	e.args = a.args()
	e.script = scriptBatch
	if !mixed {
		e.script = batchScriptFor(alg)
	}
	return e
}

// lone returns how many of order's first items are lone requests of one
// cost under one policy, each on a key of its own (a run of one): an 'm'
// record decides them.
func lone(order []*waiter) int {
	w := order[0]
	if w.reqs[0].Cost < 0 {
		return 0
	}
	k := 0
	for k < len(order) {
		x := order[k]
		if !x.single() || x.reqs[0].Policy != w.reqs[0].Policy || x.reqs[0].Cost != w.reqs[0].Cost ||
			k+1 < len(order) && sameRun(x, order[k+1]) {
			break
		}
		k++
	}
	return k
}

// sameRun reports whether x is a single decision on w's policy and key.
func sameRun(w, x *waiter) bool {
	return x.single() && x.reqs[0].Policy == w.reqs[0].Policy && x.keys[0] == w.keys[0]
}

// single reports whether w is a Decide's request: one that runs of requests
// on a key hold.
func (w *waiter) single() bool { return w.op == opDecide && !w.all }

// arrange orders batch for encodeBatch: each single decision moves up to the
// first one on its policy and key, the rest (sets, reservations, releases)
// keeps its place.
func arrange(batch []*waiter) []*waiter {
	if len(batch) < 3 {
		return batch
	}
	type runKey struct {
		p   *sluice.Policy
		key string
	}
	runs := make(map[runKey][]*waiter, len(batch))
	var firsts []*waiter // sets, and the first request of each run
	for _, w := range batch {
		if !w.single() {
			firsts = append(firsts, w)
			continue
		}
		rk := runKey{w.reqs[0].Policy, w.keys[0]}
		if runs[rk] == nil {
			firsts = append(firsts, w)
		}
		runs[rk] = append(runs[rk], w)
	}
	if len(firsts) == len(batch) {
		return batch
	}
	order := make([]*waiter, 0, len(batch))
	for _, w := range firsts {
		if !w.single() {
			order = append(order, w)
		} else {
			order = append(order, runs[runKey{w.reqs[0].Policy, w.keys[0]}]...)
		}
	}
	return order
}

// argBuilder builds an ARGV in one allocation of text.
type argBuilder struct {
	b    []byte
	ends []int
}

func (a *argBuilder) str(s string) {
	a.b = append(a.b, s...)
	a.ends = append(a.ends, len(a.b))
}

func (a *argBuilder) int(v int64) {
	a.b = strconv.AppendInt(a.b, v, 10)
	a.ends = append(a.ends, len(a.b))
}

// policy appends the algorithm's code, P, L, C and T.
func (a *argBuilder) policy(p *sluice.Policy) {
	P, L, C, T := policyInts(p)
	a.str(algoCode(p.Algorithm))
	a.int(P)
	a.int(L)
	a.int(C)
	a.int(T)
}

func (a *argBuilder) args() []string {
	all := string(a.b)
	out := make([]string, len(a.ends))
	start := 0
	for i, end := range a.ends {
		out[i], start = all[start:end], end
	}
	return out
}
