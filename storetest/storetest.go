// Package storetest is the conformance suite every sluice.Store passes: the same
// vectors, randomized traces and rule checks, run against a store whose clock the
// suite controls. It asserts every rule and guarantee of Sluice's decision
// contract for every algorithm, so a store that passes returns the same Results as
// every other store. The store must implement sluice.Charger (charges of usage
// beyond the limit are part of the contract) and hold in-flight slots
// (implement sluice.SlotStore): the Slots cases check them.
//
// A store's own tests call Run:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, clock sluice.Clock) storetest.Harness {
//			s := memory.New(memory.WithClock(clock))
//			return storetest.Harness{Store: s, TTL: s.TTL}
//		})
//	}
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Harness is what a store under test gives the suite.
type Harness struct {
	// Store is a store reading time from the clock passed to the open function,
	// holding no state yet.
	Store sluice.Store
	// TTL reports how long the store keeps the state of (policy, key) if nothing
	// else happens — it must not be shorter than ResetAfter, nor more than a
	// millisecond longer — and false when it holds none. Optional.
	TTL func(policy, key string) (time.Duration, bool)
}

// Opener opens a fresh store reading time from clock.
type Opener func(t *testing.T, clock sluice.Clock) Harness

// Epoch is where every case's clock starts: the start of a window of every
// period the suite uses, so vectors can name offsets from window starts. It
// lies in the future so that a store expiring keys on its own real clock (Redis
// TTLs) never expires state the suite's clock still considers live.
var Epoch = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// Run runs the conformance suite against the stores open returns.
func Run(t *testing.T, open Opener) {
	t.Run("Vectors", func(t *testing.T) { testVectors(t, open) })
	t.Run("Reference", func(t *testing.T) { testReference(t, open) })
	t.Run("Guarantees", func(t *testing.T) { testGuarantees(t, open) })
	t.Run("FixedWindowBoundary", func(t *testing.T) { testFixedWindowBoundary(t, open) })
	t.Run("Peek", func(t *testing.T) { testPeek(t, open) })
	t.Run("PeekInSet", func(t *testing.T) { testPeekInSet(t, open) })
	t.Run("DeniedConsumesNothing", func(t *testing.T) { testDeniedConsumesNothing(t, open) })
	t.Run("AllOrNothing", func(t *testing.T) { testAllOrNothing(t, open) })
	t.Run("Capacity", func(t *testing.T) { testCapacity(t, open) })
	t.Run("InputErrors", func(t *testing.T) { testInputErrors(t, open) })
	t.Run("UnknownAlgorithm", func(t *testing.T) { testUnknownAlgorithm(t, open) })
	t.Run("Expiry", func(t *testing.T) { testExpiry(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open) })
	t.Run("Reset", func(t *testing.T) { testReset(t, open) })
	t.Run("Board", func(t *testing.T) { RunBoard(t, open) })
	t.Run("ChangeVectors", func(t *testing.T) { testChangeVectors(t, open) })
	t.Run("ChangeReference", func(t *testing.T) { testChangeReference(t, open) })
	t.Run("ChargeVectors", func(t *testing.T) { testChargeVectors(t, open) })
	t.Run("ChargeReference", func(t *testing.T) { testChargeReference(t, open) })
	t.Run("ChargeBounds", func(t *testing.T) { testChargeBounds(t, open) })
	t.Run("ChargeExpiry", func(t *testing.T) { testChargeExpiry(t, open) })
	t.Run("ChargeAll", func(t *testing.T) { testChargeAll(t, open) })
	t.Run("Slots", func(t *testing.T) { RunSlots(t, open) })
}

// env is one case: a fresh store and its clock.
type env struct {
	t     *testing.T
	h     Harness
	clock *Clock
	ctx   context.Context
}

func newEnv(t *testing.T, open Opener) *env {
	t.Helper()
	clock := NewClock(Epoch)
	return &env{t: t, h: open(t, clock), clock: clock, ctx: context.Background()}
}

func (e *env) limiter(p sluice.Policy) *sluice.Limiter {
	e.t.Helper()
	l, err := sluice.New(e.h.Store, p)
	if err != nil {
		e.t.Fatalf("sluice.New(%+v): %v", p, err)
	}
	return l
}

// at sets the clock to Epoch + offset.
func (e *env) at(offset time.Duration) { e.clock.Set(Epoch.Add(offset)) }

// nowMicros is the clock in µs since the Unix epoch.
func (e *env) nowMicros() int64 { return e.clock.Now().UnixMicro() }

func (e *env) allow(l *sluice.Limiter, key string, n int64) sluice.Result {
	e.t.Helper()
	res, err := l.AllowN(e.ctx, key, n)
	if err != nil {
		e.t.Fatalf("AllowN(%q, %d) at %v: %v", key, n, e.clock.Now().Sub(Epoch), err)
	}
	return res
}

// policies returns a few policies of algorithm a: limits that divide the period
// and ones that don't (so the emission interval is rounded), and a burst above
// the limit for the buckets.
func policies(a sluice.Algorithm) []sluice.Policy {
	ps := []sluice.Policy{
		{Name: "p5", Algorithm: a, Limit: 5, Period: time.Second},
		{Name: "p7", Algorithm: a, Limit: 7, Period: 100 * time.Millisecond},
		{Name: "p3", Algorithm: a, Limit: 3, Period: 10 * time.Second},
	}
	if a == sluice.TokenBucket || a == sluice.LeakyBucket || a == sluice.GCRA {
		ps = append(ps, sluice.Policy{Name: "p4b9", Algorithm: a, Limit: 4, Period: time.Second, Burst: 9})
	}
	return ps
}

func forEachAlgorithm(t *testing.T, f func(t *testing.T, a sluice.Algorithm)) {
	for _, a := range sluice.Algorithms {
		t.Run(string(a), func(t *testing.T) { f(t, a) })
	}
}

func us(d time.Duration) int64 { return int64(d / time.Microsecond) }
