package sluice_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
)

func TestParseConcurrency(t *testing.T) {
	if a, err := sluice.ParseAlgorithm("concurrency"); err != nil || a != sluice.Concurrency {
		t.Fatalf("ParseAlgorithm(concurrency) = %q, %v", a, err)
	}
	_, err := sluice.ParseAlgorithm("lottery")
	if err == nil || !strings.Contains(err.Error(), "concurrency") {
		t.Fatalf("the error for an unknown algorithm does not list concurrency: %v", err)
	}
}

func TestValidateConcurrency(t *testing.T) {
	ok := sluice.Policy{Name: "c", Algorithm: sluice.Concurrency, Limit: sluice.MaxConcurrencyLimit, Period: time.Second}
	if err := ok.Validate(); err != nil {
		t.Fatalf("%+v: %v", ok, err)
	}
	for field, p := range map[string]sluice.Policy{
		"Limit":  {Name: "c", Algorithm: sluice.Concurrency, Limit: sluice.MaxConcurrencyLimit + 1, Period: time.Second},
		"Burst":  {Name: "c", Algorithm: sluice.Concurrency, Limit: 3, Period: time.Second, Burst: 3},
		"Period": {Name: "c", Algorithm: sluice.Concurrency, Limit: 3, Period: time.Microsecond},
	} {
		var pe *sluice.PolicyError
		if err := p.Validate(); !errors.As(err, &pe) || pe.Field != field {
			t.Errorf("%+v: %v, want an error on %s", p, err, field)
		}
	}
}

// The pure core: L+1 acquisitions admit L, the denial waits exactly for
// the oldest lease, and a release frees exactly the slot named.
func TestAcquireSlotCore(t *testing.T) {
	p := sluice.Policy{Name: "c", Algorithm: sluice.Concurrency, Limit: 2, Period: time.Second}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	var held []sluice.HeldSlot
	var res sluice.Result
	held, res = sluice.AcquireSlot(&p, held, now, "a")
	if !res.Allowed || res.Remaining != 1 || res.ResetAfter != time.Second {
		t.Fatalf("first: %+v", res)
	}
	held, _ = sluice.AcquireSlot(&p, held, now+300_000, "b")
	held, res = sluice.AcquireSlot(&p, held, now+400_000, "c")
	if res.Allowed || res.RetryAfter != 600*time.Millisecond || res.ResetAfter != 900*time.Millisecond || len(held) != 2 {
		t.Fatalf("third of two: %+v, %v", res, held)
	}
	held, ok := sluice.ReleaseSlot(&p, held, now+400_000, "b")
	if !ok || len(held) != 1 || held[0].Token != "a" {
		t.Fatalf("release b: %v, %v", ok, held)
	}
	if _, ok := sluice.ReleaseSlot(&p, held, now+400_000, "b"); ok {
		t.Fatal("b released twice")
	}
	if _, ok := sluice.ReleaseSlot(&p, held, now+1_000_000, "a"); ok {
		t.Fatal("a released after its lease ended")
	}
}

func TestNewSlotToken(t *testing.T) {
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for range 1000 {
		tok := sluice.NewSlotToken()
		if !hex32.MatchString(tok) || seen[tok] {
			t.Fatalf("token %q (repeated: %v)", tok, seen[tok])
		}
		seen[tok] = true
	}
}

// A concurrency policy is acquired, never decided, and only it holds slots.
func TestConcurrencyMisuse(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	slots, err := sluice.New(store, sluice.Policy{Name: "c", Algorithm: sluice.Concurrency, Limit: 2, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rate, err := sluice.New(store, sluice.Policy{Name: "r", Algorithm: sluice.GCRA, Limit: 2, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := slots.Allow(ctx, "k"); !errors.Is(err, sluice.ErrAcquireOnly) {
		t.Errorf("Allow on a concurrency policy: %v", err)
	}
	if _, err := sluice.AllowAll(ctx, sluice.Check{Limiter: slots, Key: "k"}, sluice.Check{Limiter: rate, Key: "k"}); !errors.Is(err, sluice.ErrAcquireOnly) {
		t.Errorf("AllowAll with a concurrency check: %v", err)
	}
	if err := sluice.CheckRequest(sluice.Request{Policy: &sluice.Policy{Name: "c", Algorithm: sluice.Concurrency, Limit: 2, Period: time.Second}, Key: "k", Cost: 1}); !errors.Is(err, sluice.ErrAcquireOnly) {
		t.Errorf("CheckRequest of a concurrency policy: %v", err)
	}
	if _, _, err := rate.Acquire(ctx, "k"); !errors.Is(err, sluice.ErrNotConcurrency) {
		t.Errorf("Acquire on gcra: %v", err)
	}
	if _, err := rate.Release(ctx, "k", "t"); !errors.Is(err, sluice.ErrNotConcurrency) {
		t.Errorf("Release on gcra: %v", err)
	}
	if _, _, err := slots.Acquire(ctx, ""); !errors.Is(err, sluice.ErrInvalidKey) {
		t.Errorf("Acquire with an empty key: %v", err)
	}
	if _, _, err := sluice.AcquireAll(ctx, sluice.Check{Limiter: slots, Key: "k", Cost: 2}); !errors.Is(err, sluice.ErrInvalidCost) {
		t.Errorf("AcquireAll of 2 slots: %v", err)
	}
	other, _ := sluice.New(memory.New(), rate.Policy())
	if _, _, err := sluice.AcquireAll(ctx, sluice.Check{Limiter: slots, Key: "k"}, sluice.Check{Limiter: other, Key: "k"}); !errors.Is(err, sluice.ErrStoreMismatch) {
		t.Errorf("AcquireAll over two stores: %v", err)
	}
	if _, err := sluice.New(plainStore{}, slots.Policy()); err == nil || !strings.Contains(err.Error(), "SlotStore") {
		t.Errorf("New of a concurrency policy on a store without slots: %v", err)
	}
}

// plainStore is a Store that holds no slots.
type plainStore struct{}

func (plainStore) Decide(context.Context, sluice.Request) (sluice.Result, error) {
	return sluice.Result{}, nil
}

func (plainStore) DecideAll(context.Context, []sluice.Request, []sluice.Result) error { return nil }
