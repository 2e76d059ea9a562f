package sluice_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
)

// onlyDecides is a store of its own that does not implement Charger.
type onlyDecides struct{ sluice.Store }

func TestChargeErrors(t *testing.T) {
	ctx := context.Background()
	p := sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Second}
	plain, _ := sluice.New(onlyDecides{memory.New()}, p)
	if _, err := plain.Charge(ctx, "k", 1); !errors.Is(err, sluice.ErrNotChargeable) {
		t.Errorf("Charge on a store that cannot charge: %v, want ErrNotChargeable", err)
	}
	if _, err := sluice.ChargeAll(ctx, sluice.Usage{Limiter: plain, Key: "k", Cost: 1}); !errors.Is(err, sluice.ErrNotChargeable) {
		t.Errorf("ChargeAll on a store that cannot charge: %v, want ErrNotChargeable", err)
	}
	lim, _ := sluice.New(memory.New(), p)
	other, _ := sluice.New(memory.New(), p)
	for _, c := range []struct {
		key  string
		cost int64
		want error
	}{
		{"k", -1, sluice.ErrInvalidCost},
		{"", 1, sluice.ErrInvalidKey},
		{strings.Repeat("k", sluice.MaxKeyLen+1), 1, sluice.ErrInvalidKey},
	} {
		if _, err := lim.Charge(ctx, c.key, c.cost); !errors.Is(err, c.want) {
			t.Errorf("Charge(%.10q…, %d): %v, want %v", c.key, c.cost, err, c.want)
		}
	}
	if _, err := sluice.ChargeAll(ctx, sluice.Usage{Limiter: lim, Key: "k", Cost: 1}, sluice.Usage{Limiter: other, Key: "k", Cost: 1}); !errors.Is(err, sluice.ErrStoreMismatch) {
		t.Errorf("ChargeAll over two stores: %v, want ErrStoreMismatch", err)
	}
	if res, err := sluice.ChargeAll(ctx); res != nil || err != nil {
		t.Errorf("ChargeAll of nothing: %v, %v", res, err)
	}
	slots, _ := sluice.New(memory.New(), sluice.Policy{Name: "c", Algorithm: sluice.Concurrency, Limit: 2, Period: time.Second})
	if _, err := slots.Charge(ctx, "k", 1); !errors.Is(err, sluice.ErrAcquireOnly) {
		t.Errorf("Charge of a concurrency policy: %v, want ErrAcquireOnly", err)
	}
	var zero sluice.Limiter
	if _, err := zero.Charge(ctx, "k", 1); !errors.Is(err, sluice.ErrInvalidPolicy) {
		t.Errorf("Charge on a zero Limiter: %v, want ErrInvalidPolicy", err)
	}
	if _, err := sluice.ChargeAll(ctx, sluice.Usage{Limiter: nil, Key: "k", Cost: 1}); !errors.Is(err, sluice.ErrInvalidPolicy) {
		t.Errorf("ChargeAll with a nil Limiter: %v, want ErrInvalidPolicy", err)
	}
	req, err := sluice.CheckCharge(sluice.Request{Policy: &p, Key: "k", Cost: math.MaxInt64})
	if err != nil || req.Cost != sluice.MaxCharge {
		t.Errorf("CheckCharge of MaxInt64: cost %d, %v; want MaxCharge", req.Cost, err)
	}
}

// TestChargeDoneWhen: a fixed window of 10 a minute charged 15 answers −5,
// and the next check is denied until the window ends; a token bucket repays
// what is owed at its rate.
func TestChargeDoneWhen(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	fw := sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute}
	st, res := sluice.Charge(&fw, sluice.State{}, start+20e6, 15)
	if res.Allowed || res.Remaining != -5 || res.RetryAfter != 40*time.Second {
		t.Fatalf("fixed window charged 15 of 10: %+v, want −5 and 40s to wait", res)
	}
	if _, res := sluice.Decide(&fw, st, start+30e6, 1); res.Allowed || res.RetryAfter != 30*time.Second {
		t.Fatalf("the next check: %+v, want denied until the window's end", res)
	}
	tb := sluice.Policy{Name: "tb", Algorithm: sluice.TokenBucket, Limit: 10, Period: time.Second}
	st, _ = sluice.Charge(&tb, sluice.State{}, start, 25) // 15 owed beyond the bucket of 10
	for sec := int64(1); sec <= 3; sec++ {
		_, peek := sluice.Decide(&tb, st, start+sec*1e6, 0)
		if want := min(10, max(0, 10*sec-15)); peek.Remaining != want || peek.Allowed != (want > 0) {
			t.Fatalf("after %ds: %+v, want %d left", sec, peek, want)
		}
	}
}

// FuzzCharge charges and decides on one key at random, on every algorithm,
// and checks what the contract promises whatever was charged: a charge that
// fits answers as the decision of its cost; one that does not leaves the key
// owing, denied for one unit until its RetryAfter and admitted at it; a
// decision's Remaining stays within [0, capacity] while a charge's may go
// below; the key is initial again at ResetAfter; and no charge however large
// overflows the math.
func FuzzCharge(f *testing.F) {
	f.Add(uint8(0), uint8(5), uint16(1000), uint8(0), []byte{1, 15, 0, 0, 1, 3, 1, 255, 200})
	f.Add(uint8(3), uint8(10), uint16(1000), uint8(5), []byte{1, 8, 0, 0, 1, 100, 1, 3, 10})
	f.Add(uint8(5), uint8(3), uint16(1000), uint8(0), []byte{1, 255, 0, 1, 255, 0, 0, 1, 250})
	f.Add(uint8(1), uint8(3), uint16(1000), uint8(0), []byte{0, 1, 1, 0, 1, 1, 0, 1, 1, 1, 2, 1, 0, 1, 200})
	f.Add(uint8(2), uint8(10), uint16(1000), uint8(0), []byte{1, 15, 100, 0, 1, 100})
	f.Add(uint8(4), uint8(7), uint16(3), uint8(2), []byte{1, 254, 0, 0, 1, 1})
	f.Fuzz(func(t *testing.T, alg, limit uint8, period uint16, burst uint8, ops []byte) {
		a := sluice.Algorithms[int(alg)%len(sluice.Algorithms)]
		p := sluice.Policy{Name: "f", Algorithm: a, Limit: int64(limit%50) + 1, Period: time.Duration(period%5000+1) * time.Millisecond}
		if a == sluice.TokenBucket || a == sluice.GCRA || a == sluice.LeakyBucket {
			p.Burst = int64(burst % 60)
		}
		capacity := p.Capacity()
		now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
		var st sluice.State
		for i := 0; i+2 < len(ops) && i < 300; i += 3 {
			now += int64(ops[i+2]) * 1009
			var next sluice.State
			var res sluice.Result
			if ops[i]&1 == 1 {
				cost := int64(ops[i+1])
				if ops[i]&2 == 2 {
					cost = math.MaxInt64 >> (ops[i+1] % 16) // far beyond the caps
				}
				cost = min(cost, sluice.MaxCharge)
				next, res = sluice.Charge(&p, st, now, cost)
				if cost >= 1 && cost <= capacity { // a charge of 0 is not a peek: it asks whether nothing is owed
					if _, d := sluice.Decide(&p, st, now, cost); d.Allowed != res.Allowed || d.Allowed && (d.Remaining != res.Remaining || d.ResetAfter != res.ResetAfter) {
						t.Fatalf("op %d: charge %d %+v, but the decision was %+v", i, cost, res, d)
					}
				}
				if res.Delay != 0 || res.Allowed && (res.RetryAfter != 0 || res.Remaining < 0) {
					t.Fatalf("op %d: charge %d: %+v", i, cost, res)
				}
				if !res.Allowed {
					wait := res.RetryAfter.Microseconds()
					if _, r := sluice.Decide(&p, next, now+wait-1, 1); wait <= 0 || r.Allowed {
						t.Fatalf("op %d: charge %d: %+v, admitted 1µs before RetryAfter: %+v", i, cost, res, r)
					}
					if _, r := sluice.Decide(&p, next, now+wait, 1); !r.Allowed {
						t.Fatalf("op %d: charge %d: %+v, denied at RetryAfter: %+v", i, cost, res, r)
					}
				}
			} else {
				cost := int64(ops[i+1]) % (capacity + 1)
				next, res = sluice.Decide(&p, st, now, cost)
				if res.Remaining < 0 || res.Remaining > capacity {
					t.Fatalf("op %d: decision of %d: Remaining %d outside [0, %d]", i, cost, res.Remaining, capacity)
				}
			}
			if res.ResetAfter < 0 || res.RetryAfter < 0 || res.ResetAfter > time.Duration(1<<52)*time.Microsecond+p.Period {
				t.Fatalf("op %d: %+v out of bounds", i, res)
			}
			if reset := res.ResetAfter.Microseconds(); reset > 0 {
				if _, r := sluice.Decide(&p, next, now+reset, 0); r.ResetAfter != 0 || r.Remaining != capacity {
					t.Fatalf("op %d: at ResetAfter %v: %+v, want the initial state", i, res.ResetAfter, r)
				}
			}
			st = next
		}
	})
}
