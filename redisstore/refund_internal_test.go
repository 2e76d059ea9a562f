package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/storetest"
)

// TestRefund drives the scripts' refund mode, which the cross-slot path uses
// when a reservation loses a race: random admissions, then the reservation x,
// then more admissions, then x's refund. The key must then answer like a key
// that never saw x — exactly for the windows and the log; for the buckets
// never more generously, and exactly when nothing else was admitted after x.
// A key whose refund leaves it initial is deleted.
// testTimeout bounds each call generously: a loaded machine may take far
// longer than the default timeout, and no test here is about timing.
const testTimeout = 5 * time.Second

func TestRefund(t *testing.T) {
	c := refundClient(t)
	ctx := context.Background()
	for ai, a := range sluice.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ai), 99))
			policies := []*sluice.Policy{
				{Name: "5-per-1s", Algorithm: a, Limit: 5, Period: time.Second},
				{Name: "7-per-100ms", Algorithm: a, Limit: 7, Period: 100 * time.Millisecond},
			}
			if a == sluice.TokenBucket || a == sluice.GCRA || a == sluice.LeakyBucket {
				policies = append(policies, &sluice.Policy{Name: "4-per-1s-burst-9", Algorithm: a, Limit: 4, Period: time.Second, Burst: 9})
			}
			for trial := 0; trial < 150; trial++ {
				p := policies[trial%len(policies)]
				clock := storetest.NewClock(storetest.Epoch)
				s := New(c, WithPrefix(fmt.Sprintf("refund%d:", trial)), WithClock(clock), WithTimeout(testTimeout))
				var ref sluice.State // the key without x
				step := func() {
					clock.Advance(time.Duration(rng.Int64N(int64(p.Period)/5+1)) / time.Microsecond * time.Microsecond)
				}
				admit := func() {
					cost := rng.Int64N(2) + 1
					r, err := s.Decide(ctx, sluice.Request{Policy: p, Key: "k", Cost: cost})
					if err != nil {
						t.Fatal(err)
					}
					if r.Allowed {
						next, want := sluice.Decide(p, ref, clock.Now().UnixMicro(), cost)
						if !want.Allowed {
							t.Fatalf("trial %d: admitted with x but not without it", trial)
						}
						ref = next
					}
				}
				before, after := rng.IntN(4), rng.IntN(3)
				if trial%10 == 0 {
					before, after = 0, 0 // x alone: the refund must delete the key
				}
				for range before {
					step()
					admit()
				}
				step()
				x := sluice.Request{Policy: p, Key: "k", Cost: rng.Int64N(2) + 1}
				var held [replyLen]int64
				if err := s.run.Run(ctx, scriptFor(a), []string{s.Key(p, "k")}, s.requestArgs(modeWrite, x, s.now(), false, 0, 0), held[:]); err != nil {
					t.Fatal(err)
				}
				if held[replyAllowed] == 0 {
					continue
				}
				for range after {
					if rng.IntN(2) == 0 {
						step()
					}
					admit()
				}
				if rng.IntN(2) == 0 {
					step()
				}
				var reply [replyLen]int64
				args := s.requestArgs(modeRefund, x, s.now(), true, held[replyRef1], held[replyRef2])
				if err := s.run.Run(ctx, scriptFor(a), []string{s.Key(p, "k")}, args, reply[:]); err != nil {
					t.Fatal(err)
				}
				exists, err := c.Do(ctx, c.B().Exists().Key(s.Key(p, "k")).Build()).AsInt64()
				if err != nil {
					t.Fatal(err)
				}
				if before+after == 0 && exists != 0 {
					t.Fatalf("trial %d: refunding the only admission left the key in place", trial)
				}
				exact := after == 0 || !(a == sluice.TokenBucket || a == sluice.GCRA || a == sluice.LeakyBucket)
				for _, d := range []time.Duration{0, p.Period / 3, p.Period / 2, p.Period} {
					now := clock.Now().Add(d)
					_, want := sluice.Decide(p, ref, now.UnixMicro(), 0)
					peekClock := storetest.NewClock(now)
					got, err := New(c, WithPrefix(fmt.Sprintf("refund%d:", trial)), WithClock(peekClock), WithTimeout(testTimeout)).
						Decide(ctx, sluice.Request{Policy: p, Key: "k"})
					if err != nil {
						t.Fatal(err)
					}
					if exact && got != want || !exact && (got.Remaining > want.Remaining || got.ResetAfter < want.ResetAfter) {
						t.Fatalf("trial %d (%s, %d before x, %d after), %v after the refund:\n got %+v\nwant %+v (without x)",
							trial, p.Name, before, after, d, got, want)
					}
				}
			}
		})
	}
}

// TestRefundInterleaved: two sets racing on one key each reserve a unit, at
// one instant, and are refunded in the order they reserved — as the
// cross-slot path does when both lose on a later key. Each refund gives back
// its own unit, the first one's included though the second's running total
// moved when the first was refunded, so the key ends as it began.
func TestRefundInterleaved(t *testing.T) {
	c := refundClient(t)
	ctx := context.Background()
	for _, a := range []sluice.Algorithm{sluice.FixedWindow, sluice.SlidingWindow, sluice.SlidingLog} {
		p := &sluice.Policy{Name: "p", Algorithm: a, Limit: 5, Period: time.Hour}
		s := New(c, WithPrefix("interleaved-"+string(a)+":"), WithClock(storetest.NewClock(storetest.Epoch)), WithTimeout(testTimeout))
		keys := []string{s.Key(p, "k")}
		if _, err := s.Decide(ctx, sluice.Request{Policy: p, Key: "k", Cost: 1}); err != nil {
			t.Fatal(err)
		}
		var held [2][replyLen]int64
		for i := range held {
			x := sluice.Request{Policy: p, Key: "k", Cost: 1}
			if err := s.run.Run(ctx, scriptFor(a), keys, s.requestArgs(modeWrite, x, s.now(), false, 0, 0), held[i][:]); err != nil || held[i][replyAllowed] == 0 {
				t.Fatalf("%s: reservation %d: %v %v", a, i, held[i], err)
			}
		}
		for i := range held {
			x := sluice.Request{Policy: p, Key: "k", Cost: 1}
			var reply [replyLen]int64
			if err := s.run.Run(ctx, scriptFor(a), keys, s.requestArgs(modeRefund, x, s.now(), true, held[i][replyRef1], held[i][replyRef2]), reply[:]); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := s.Decide(ctx, sluice.Request{Policy: p, Key: "k"}); err != nil || got.Remaining != 4 {
			t.Fatalf("%s: after both refunds %+v (%v), want 4 remaining as before them", a, got, err)
		}
	}
}

// refundClient is a client of a fresh redis-server, closed at cleanup.
func refundClient(t *testing.T) rueidis.Client {
	t.Helper()
	o, err := rueidis.ParseURL(redistest.Start(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	o.DisableCache = true
	c, err := rueidis.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
