package overrides

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/storetest"
)

var t0 = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

var base = sluice.Policy{Name: "api", Algorithm: sluice.GCRA, Limit: 10, Period: time.Minute}

func TestLookupPrecedence(t *testing.T) {
	set := NewSet([]Override{
		{Policy: "api", Prefix: "acme:", Limit: 100, Period: time.Minute},
		{Policy: "api", Prefix: "acme:eu:", Limit: 200, Period: time.Minute},
		{Policy: "api", Key: "acme:eu:bob", Limit: 300, Period: time.Minute},
		{Policy: "api", Key: "gone", Limit: 5, Period: time.Minute, ExpiresAt: t0},
		{Policy: "api", Prefix: "go", Limit: 6, Period: time.Minute},
	})
	for key, want := range map[string]int64{
		"acme:eu:bob":   300, // exact key
		"acme:eu:alice": 200, // longest prefix
		"acme:us:carol": 100,
		"acme:":         100, // a prefix matches itself
		"acme":          0,   // shorter than every prefix
		"other":         0,
		"gone":          6, // expired: the prefix applies
	} {
		got := int64(0)
		if o := set.Lookup("api", key, t0); o != nil {
			got = o.Limit
		}
		if got != want {
			t.Errorf("Lookup(api, %q) limit = %d, want %d", key, got, want)
		}
	}
	if o := set.Lookup("api", "gone", t0.Add(-time.Second)); o == nil || o.Limit != 5 {
		t.Errorf("before expiry: got %+v, want the key's override", o)
	}
	if set.Has("other") || set.Lookup("other", "acme:x", t0) != nil {
		t.Error("a policy without overrides has one")
	}
	if set.Len() != 5 || set.Count("api") != 5 {
		t.Errorf("Len %d Count %d, want 5 and 5", set.Len(), set.Count("api"))
	}
	if got := len(set.List("api", t0)); got != 4 {
		t.Errorf("List leaves the expired out: got %d, want 4", got)
	}
}

func TestValidate(t *testing.T) {
	long := string(make([]byte, sluice.MaxKeyLen+1))
	for name, c := range map[string]struct {
		o     Override
		field string
	}{
		"no target":      {Override{Limit: 1, Period: time.Second}, "key"},
		"both targets":   {Override{Key: "a", Prefix: "b", Limit: 1, Period: time.Second}, "key"},
		"long key":       {Override{Key: long, Limit: 1, Period: time.Second}, "key"},
		"long prefix":    {Override{Prefix: long, Limit: 1, Period: time.Second}, "prefix"},
		"bad utf-8":      {Override{Key: "\xff", Limit: 1, Period: time.Second}, "key"},
		"zero limit":     {Override{Key: "a", Period: time.Second}, "limit"},
		"short period":   {Override{Key: "a", Limit: 1, Period: time.Microsecond}, "period"},
		"long reason":    {Override{Key: "a", Limit: 1, Period: time.Second, Reason: string(make([]byte, MaxReasonLen+1))}, "reason"},
		"past expiry":    {Override{Key: "a", Limit: 1, Period: time.Second, ExpiresAt: t0}, "expires_at"},
		"negative burst": {Override{Key: "a", Limit: 1, Period: time.Second, Burst: -1}, "burst"},
	} {
		err := c.o.Validate(base, t0)
		var e *Error
		if !errors.As(err, &e) || e.Field != c.field || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want an *Error on %s", name, err, c.field)
		}
	}
	fw := sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second}
	if err := (&Override{Key: "a", Limit: 5, Period: time.Second, Burst: 3}).Validate(fw, t0); err == nil {
		t.Error("a burst on a fixed window was accepted")
	}
	if err := (&Override{Prefix: "a", Limit: 5, Period: time.Second, Burst: 3, ExpiresAt: t0.Add(time.Hour)}).Validate(base, t0); err != nil {
		t.Errorf("a valid override: %v", err)
	}
}

// testStore runs the Store tests on any backend.
func testStore(t *testing.T, a, b *Store, clock *storetest.Clock) {
	ctx := context.Background()
	o, err := a.Put(ctx, base, Override{Key: "k", Limit: 50, Period: time.Second, Reason: "launch", ExpiresAt: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if o.Policy != "api" || !o.UpdatedAt.Equal(t0) {
		t.Errorf("Put returned %+v", o)
	}
	if got := a.Snapshot().Lookup("api", "k", clock.Now()); got == nil || got.Limit != 50 || got.Reason != "launch" || !got.ExpiresAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after Put: %+v", got)
	}
	if err := b.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Put(ctx, base, Override{Key: "k", Limit: 0, Period: time.Second}); !errors.Is(err, ErrInvalid) {
		t.Errorf("limit 0: got %v, want ErrInvalid", err)
	}
	if err := a.Delete(ctx, "api", "k:nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting what is not there: %v", err)
	}
	clock.Set(t0.Add(time.Minute))
	if err := a.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if a.Snapshot().Len() != 0 {
		t.Error("an expired override stays in the snapshot after a refresh")
	}
	// Bounds: expired overrides do not count.
	t1 := t0.Add(time.Minute)
	for i := range MaxPerPolicy {
		if _, err := a.Put(ctx, base, Override{Prefix: "p" + itoa(i), Limit: 1, Period: time.Second, ExpiresAt: t1.Add(time.Second)}); err != nil {
			t.Fatalf("override %d: %v", i, err)
		}
	}
	if _, err := a.Put(ctx, base, Override{Key: "one-more", Limit: 1, Period: time.Second}); !errors.Is(err, ErrFull) {
		t.Fatalf("beyond MaxPerPolicy: got %v, want ErrFull", err)
	}
	if _, err := a.Put(ctx, base, Override{Prefix: "p7", Limit: 9, Period: time.Second}); err != nil {
		t.Errorf("replacing one at the bound: %v", err)
	}
	clock.Set(t1.Add(time.Second))
	if _, err := a.Put(ctx, base, Override{Key: "one-more", Limit: 1, Period: time.Second}); err != nil {
		t.Errorf("after the others expired: %v", err)
	}
	if err := a.Delete(ctx, "api", "k:one-more"); err != nil {
		t.Error(err)
	}
	if err := a.Delete(ctx, "api", "p:p7"); err != nil {
		t.Error(err)
	}
	if n := a.Snapshot().Len(); n != 0 {
		t.Errorf("%d overrides left", n)
	}
}

var quiet = WithLogger(slog.New(slog.DiscardHandler))

func itoa(i int) string { return strconv.Itoa(i) }

func TestMemoryStore(t *testing.T) {
	clock := storetest.NewClock(t0)
	a := NewMemory(WithClock(clock), quiet)
	testStore(t, a, a, clock)
}

// TestRunDropsExpired: Run takes an expired override out of the snapshot
// (and the gauge), on the memory store too.
func TestRunDropsExpired(t *testing.T) {
	clock := storetest.NewClock(t0)
	s := NewMemory(WithClock(clock), WithPollInterval(5*time.Millisecond), quiet)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if _, err := s.Put(ctx, base, Override{Key: "k", Limit: 2, Period: time.Second, ExpiresAt: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if s.Snapshot().Len() != 1 {
		t.Fatal("not in force after Put")
	}
	clock.Set(t0.Add(time.Second))
	testwait.Until(t, "the expired override gone from the snapshot", func() bool { return s.Snapshot().Len() == 0 })
}
