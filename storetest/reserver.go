package storetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// RunReserver checks a store's sluice.Reserver against the pure core
// (sluice.Reserve, sluice.Refund, sluice.Decide): random traces of
// reservations, releases and decisions on a few keys must give the same
// answers the core gives on states the suite keeps itself. The harness's
// Store must implement sluice.Reserver.
func RunReserver(t *testing.T, open Opener) {
	for _, a := range sluice.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			e := newEnv(t, open)
			rs, ok := e.h.Store.(sluice.Reserver)
			if !ok {
				t.Fatalf("%T does not implement sluice.Reserver", e.h.Store)
			}
			if sluice.Reservable(a) {
				for _, p := range policies(a) {
					t.Run(p.Name, func(t *testing.T) { reserveTrace(e, rs, p) })
				}
				return
			}
			p := policies(a)[0]
			_, err := rs.Reserve(e.ctx, sluice.Request{Policy: &p, Key: "k", Cost: 1}, 2)
			if !errors.Is(err, sluice.ErrNotReservable) {
				t.Fatalf("Reserve on %s: got %v, want ErrNotReservable", a, err)
			}
		})
	}
}

type heldReservation struct {
	key string
	r   sluice.Reservation
}

func reserveTrace(e *env, rs sluice.Reserver, p sluice.Policy) {
	t := e.t
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, uint64(p.Limit)))
	keys := []string{"a", "b"}
	model := map[string]sluice.State{}
	var held []heldReservation
	period := us(p.Period)
	for i := 0; i < 400; i++ {
		if rng.IntN(3) == 0 {
			e.clock.Advance(time.Duration(rng.Int64N(period/4)+1) * time.Microsecond)
		}
		now := e.nowMicros()
		key := keys[rng.IntN(len(keys))]
		req := sluice.Request{Policy: &p, Key: key, Cost: rng.Int64N(min(3, p.Capacity())) + 1}
		switch op := rng.IntN(4); {
		case op < 2:
			upTo := req.Cost + rng.Int64N(p.Capacity())
			got, err := rs.Reserve(ctx, req, upTo)
			if err != nil {
				t.Fatalf("step %d: Reserve: %v", i, err)
			}
			next, want := sluice.Reserve(&p, model[key], now, req.Cost, upTo)
			model[key] = next
			if got.Granted != want.Granted || !sameResult(got.Result, want.Result) {
				t.Fatalf("step %d: Reserve(%q, %d..%d) = %d %+v, want %d %+v", i, key, req.Cost, upTo, got.Granted, got.Result, want.Granted, want.Result)
			}
			if got.Granted > 0 {
				held = append(held, heldReservation{key, got})
			}
		case op == 2 && len(held) > 0:
			j := rng.IntN(len(held))
			h := held[j]
			held = append(held[:j], held[j+1:]...)
			unused := rng.Int64N(h.r.Granted) + 1
			req.Key, req.Cost = h.key, unused
			if err := rs.Release(ctx, req, h.r, unused); err != nil {
				t.Fatalf("step %d: Release: %v", i, err)
			}
			model[h.key] = sluice.Refund(&p, model[h.key], now, h.r, unused)
		default:
			got, err := rs.Decide(ctx, req)
			if err != nil {
				t.Fatalf("step %d: Decide: %v", i, err)
			}
			next, want := sluice.Decide(&p, model[key], now, req.Cost)
			model[key] = next
			if !sameResult(got, want) {
				t.Fatalf("step %d: Decide(%q, %d) = %+v, want %+v", i, key, req.Cost, got, want)
			}
		}
	}
}

// sameResult compares what a reservation reports; Delay is not leased.
func sameResult(a, b sluice.Result) bool {
	return a.Allowed == b.Allowed && a.Remaining == b.Remaining && a.RetryAfter == b.RetryAfter && a.ResetAfter == b.ResetAfter
}
