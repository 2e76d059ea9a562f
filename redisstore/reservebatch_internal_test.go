package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/storetest"
)

// reservablePolicies returns a policy of each algorithm that can reserve.
func reservablePolicies(limit int64) []*sluice.Policy {
	var pols []*sluice.Policy
	for _, a := range sluice.Algorithms {
		if sluice.Reservable(a) {
			pols = append(pols, &sluice.Policy{Name: "rb-" + string(a), Algorithm: a, Limit: limit, Period: time.Minute})
		}
	}
	return pols
}

// openForFuzz opens a store on a redis-server of its own for f.
func openForFuzz(f *testing.F) *Store {
	srv := redistest.Start(f)
	s, err := Open(srv.URL(), WithTimeout(testTimeout))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Close() })
	return s
}

// FuzzBatchOps decodes its input into one batch of decisions, reservations,
// releases and dry runs (an op byte of 5 mod 6) — a few keys of every reservable algorithm, repeats of a key,
// costs and upTo's around the limit, releases of reservations made before —
// makes it in one call of decide_batch, and wants each item to get what it
// gets alone, in the call's order at the same instant, on a second set of
// keys, and every key to end in the same state.
func FuzzBatchOps(f *testing.F) {
	s := openForFuzz(f)
	pols := reservablePolicies(5)
	f.Add([]byte{1, 0, 3, 1, 0, 3, 1, 0, 3, 1, 1, 9})                             // one key three times, then another
	f.Add([]byte{1, 1, 7, 0, 3, 7, 2, 2, 7, 1, 6, 8, 0, 3, 2, 1, 11, 9})          // keys of several algorithms, all kinds
	f.Add([]byte{1, 5, 1, 1, 5, 1, 1, 5, 1, 2, 5, 1, 1, 5, 1, 1, 5, 1})           // past the limit, a release between
	f.Add([]byte{5, 0, 2, 1, 0, 3, 5, 0, 2, 0, 0, 1, 5, 1, 2, 1, 0, 23, 5, 0, 2}) // dry runs between writes to their key
	f.Add([]byte{0, 0, 0})
	f.Add([]byte{})
	round := 0
	f.Fuzz(func(t *testing.T, in []byte) {
		round++
		ctx := context.Background()
		clock := storetest.NewClock(storetest.Epoch)
		s.clock, s.prefix = clock, fmt.Sprintf("bfuzz%d:", round)
		// A reservation of 2 on every (policy, key) on both sides, for the
		// releases to give back.
		made := map[string]sluice.Reservation{}
		for _, p := range pols {
			for k := range 3 {
				for _, side := range []string{"batch-", "alone-"} {
					r, err := s.Reserve(ctx, sluice.Request{Policy: p, Key: fmt.Sprint(side, "k", k), Cost: 1}, 2)
					if err != nil {
						t.Fatal(err)
					}
					made[s.Key(p, fmt.Sprint(side, "k", k))] = r
				}
			}
		}
		var batch []*waiter
		released := map[string]bool{}
		for i := 0; i+2 < len(in) && len(batch) < maxBatch; i += 3 {
			req := sluice.Request{Policy: pols[int(in[i+1])%len(pols)], Key: fmt.Sprintf("batch-k%d", int(in[i+1])/len(pols)%3), Cost: int64(in[i+2] % 3)}
			w := &waiter{ctx: ctx, op: op(in[i] % 3)}
			w.setOne(req, s.Key(req.Policy, req.Key))
			if in[i]%6 == 5 {
				w.setDry(ctx, req, w.keys[0], make([]int64, batchStride))
			}
			switch w.op {
			case opDecide:
				w.oneRes[0], w.results = sluice.Result{}, w.oneRes[:]
			case opReserve:
				w.upTo = int64(in[i+2] / 3 % 8)
			case opRelease:
				if released[w.keys[0]] {
					continue // a reservation is given back once
				}
				released[w.keys[0]] = true
				w.res = made[w.keys[0]]
				w.one[0].Cost = 1 + int64(in[i+2])%w.res.Granted
			}
			batch = append(batch, w)
		}
		if len(batch) < 2 {
			return
		}
		var order []*waiter
		s.onBatch = func(o []*waiter) { order = o }
		defer func() { s.onBatch = nil }()
		s.runBatch(ctx, batch)
		s.onBatch = nil
		for i, w := range order {
			if w.err != nil {
				t.Fatal(w.err)
			}
			req := w.reqs[0]
			req.Key = "alone-" + req.Key[len("batch-"):]
			switch w.op {
			case opDecide:
				want, err := s.Decide(ctx, req)
				if err != nil || w.results[0] != want {
					t.Fatalf("item %d of %d, a decision (%s, cost %d): batch %+v, alone %+v %v", i, len(order), req.Policy.Algorithm, req.Cost, w.results[0], want, err)
				}
			case opReserve:
				want, err := s.Reserve(ctx, req, w.upTo)
				if err != nil || w.res != want {
					t.Fatalf("item %d of %d, a reservation (%s, cost %d, up to %d): batch %+v, alone %+v %v",
						i, len(order), req.Policy.Algorithm, req.Cost, w.upTo, w.res, want, err)
				}
			case opRelease:
				if err := s.Release(ctx, req, made[s.Key(req.Policy, req.Key)], req.Cost); err != nil {
					t.Fatal(err)
				}
			case opDry:
				alone := &waiter{}
				alone.setDry(ctx, req, s.Key(req.Policy, req.Key), make([]int64, batchStride))
				if s.runBatch(ctx, []*waiter{alone}); alone.err != nil || !slices.Equal(w.held, alone.held) {
					t.Fatalf("item %d of %d, a dry run (%s, cost %d): batch %v, alone %v %v", i, len(order), req.Policy.Algorithm, req.Cost, w.held, alone.held, alone.err)
				}
			}
		}
		for _, p := range pols {
			for k := range 3 {
				a, _ := s.Decide(ctx, sluice.Request{Policy: p, Key: fmt.Sprint("batch-k", k)})
				b, _ := s.Decide(ctx, sluice.Request{Policy: p, Key: fmt.Sprint("alone-k", k)})
				if a != b {
					t.Fatalf("%s k%d ends as %+v in the batch, %+v alone", p.Algorithm, k, a, b)
				}
			}
		}
	})
}

// holdFirstCall makes s's first reservation call wait, before its waiter
// returns, until n more reservations are queued behind it: they must then
// share the next call. It returns the calls made, each as the waiters in the
// order the call made them.
func holdFirstCall(t *testing.T, s *Store, n int) func() [][]*waiter {
	var mu sync.Mutex
	var calls [][]*waiter
	s.onBatch = func(order []*waiter) {
		mu.Lock()
		calls = append(calls, append([]*waiter(nil), order...))
		first := len(calls) == 1
		mu.Unlock()
		if !first {
			return
		}
		queued := func() int {
			s.q.mu.Lock()
			defer s.q.mu.Unlock()
			k := 0
			for _, q := range s.q.m {
				k += len(q)
			}
			return k
		}
		// Waiting for goroutines to queue, not for time to pass; this runs
		// in the store's flush, so it reports rather than ends the test.
		if !testwait.For(testwait.Timeout, func() bool { return queued() >= n }) {
			t.Errorf("only %d of %d reservations queued", queued(), n)
		}
	}
	return func() [][]*waiter {
		mu.Lock()
		defer mu.Unlock()
		return append([][]*waiter(nil), calls...)
	}
}

// TestReservationsShareCalls queues reservations of many keys behind one in
// flight: they go as one call, each gets what it gets alone, and a waiter
// whose context ends returns its own error without failing the others.
func TestReservationsShareCalls(t *testing.T) {
	srv := redistest.Start(t)
	clock := storetest.NewClock(storetest.Epoch)
	s, err := Open(srv.URL(), WithTimeout(testTimeout), WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pols := reservablePolicies(10)
	const queued = 12
	calls := holdFirstCall(t, s, queued)
	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		_, err := s.Reserve(ctx, sluice.Request{Policy: pols[0], Key: "first", Cost: 1}, 4)
		first <- err
	}()
	testwait.Until(t, "the first call in flight (its queue exists)", func() bool {
		s.q.mu.Lock()
		defer s.q.mu.Unlock()
		return len(s.q.m) > 0
	})
	gone, cancelGone := context.WithCancel(ctx)
	cancelGone()
	type got struct {
		res sluice.Reservation
		err error
	}
	results := make([]got, queued)
	reqs := make([]sluice.Request, queued)
	var wg sync.WaitGroup
	for i := range queued {
		// Each (policy, key) twice: the second sees the first.
		reqs[i] = sluice.Request{Policy: pols[i%2], Key: fmt.Sprintf("k%d", i%3), Cost: 1}
		c := ctx
		if i == queued-1 {
			c = gone
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Reserve(c, reqs[i], 6)
			results[i] = got{r, err}
		}()
	}
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	made := calls()
	if len(made) != 2 || len(made[1]) != queued {
		t.Fatalf("%d calls (the second of %d), want 2 (the second of %d)", len(made), len(made[len(made)-1]), queued)
	}
	if err := results[queued-1].err; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter that went away got %v, want context.Canceled", err)
	}
	// The call's order is the queue's, which the goroutines raced for:
	// replay it alone on other keys, in that order, at the same instant.
	// (The waiter that went away was still reserved for: its units are
	// held until they expire, which only under-admits.)
	s.onBatch = nil
	for i, w := range made[1] {
		req := w.reqs[0]
		req.Key = "alone-" + req.Key
		want, err := s.Reserve(ctx, req, w.upTo)
		if err != nil {
			t.Fatal(err)
		}
		if w.res != want {
			t.Fatalf("reservation %d of the call (%s, key %s): shared %+v, alone %+v", i, req.Policy.Algorithm, w.reqs[0].Key, w.res, want)
		}
		if w.ctx.Err() == nil && w.res.Granted == 0 {
			t.Fatalf("reservation %d granted nothing below the limit", i)
		}
	}
}

// TestReserveBatchFailure: when the shared call fails, every reservation in
// it gets the error, once, and none is granted.
func TestReserveBatchFailure(t *testing.T) {
	srv := redistest.Start(t)
	clock := storetest.NewClock(storetest.Epoch)
	s, err := Open(srv.URL(), WithTimeout(2*time.Second), WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pols := reservablePolicies(10)
	var batch []*waiter
	for i := range 5 {
		req := sluice.Request{Policy: pols[i%len(pols)], Key: fmt.Sprintf("k%d", i), Cost: 1}
		w := &waiter{ctx: context.Background(), op: opReserve, upTo: 3}
		w.setOne(req, s.Key(req.Policy, req.Key))
		batch = append(batch, w)
	}
	srv.Kill()
	calls := 0
	s.onBatch = func([]*waiter) { calls++ }
	s.runBatch(context.Background(), batch)
	if calls != 1 {
		t.Fatalf("%d calls, want 1", calls)
	}
	for i, w := range batch {
		if w.err == nil || w.res.Granted != 0 {
			t.Fatalf("reservation %d: %+v, %v; want an error and nothing granted", i, w.res, w.err)
		}
	}
}
