package decide

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// fixed is a fixed window of limit per hour.
func fixed(name string, limit int64) *sluice.Policy {
	return &sluice.Policy{Name: name, Algorithm: sluice.FixedWindow, Limit: limit, Period: time.Hour}
}

// countingStore counts the calls that reach the memory store under it.
type countingStore struct {
	sluice.Store
	calls int
}

func (s *countingStore) Decide(ctx context.Context, r sluice.Request) (sluice.Result, error) {
	s.calls++
	return s.Store.Decide(ctx, r)
}

func (s *countingStore) DecideAll(ctx context.Context, r []sluice.Request, res []sluice.Result) error {
	s.calls++
	return s.Store.DecideAll(ctx, r, res)
}

func newStore() *countingStore {
	return &countingStore{Store: memory.New(memory.WithClock(storetest.NewClock(storetest.Epoch)))}
}

func check(p *sluice.Policy, key string, cost int64, f Flags) Check {
	return Check{Request: sluice.Request{Policy: p, Key: key, Cost: cost}, Flags: f}
}

func decide(t *testing.T, store sluice.Store, checks []Check, refused bool) (Outcome, []sluice.Result) {
	t.Helper()
	res := make([]sluice.Result, len(checks))
	out, err := Decide(context.Background(), store, checks, res, refused)
	if err != nil {
		t.Fatal(err)
	}
	return out, res
}

// remaining peeks at what p has left for key.
func remaining(t *testing.T, store sluice.Store, p *sluice.Policy, key string) int64 {
	t.Helper()
	r, err := store.Decide(context.Background(), sluice.Request{Policy: p, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return r.Remaining
}

// TestAllOrNothing: enforced checks are admitted together or not at all, and
// the ones that denied are Exhausted.
func TestAllOrNothing(t *testing.T) {
	st := newStore()
	user, global := fixed("user", 5), fixed("global", 2)
	for i := range 2 {
		if out, _ := decide(t, st, []Check{check(user, "a", 1, 0), check(global, "g", 1, 0)}, false); !out.Allowed {
			t.Fatalf("request %d denied", i)
		}
	}
	checks := []Check{check(user, "a", 1, 0), check(global, "g", 1, 0)}
	out, res := decide(t, st, checks, false)
	if out.Allowed || out.Blocked || res[0].Allowed || res[1].Allowed {
		t.Fatalf("over the global limit: %+v %+v", out, res)
	}
	if checks[0].Flags&Exhausted != 0 || checks[1].Flags&Exhausted == 0 {
		t.Errorf("exhausted flags %v %v, want only global's", checks[0].Flags, checks[1].Flags)
	}
	if got := remaining(t, st, user, "a"); got != 3 {
		t.Errorf("user has %d left after a denial, want 3: a denied batch consumes nothing", got)
	}
}

// TestShadowApart: a shadow check is charged when the request is admitted,
// only peeked at when it is denied, and never denies.
func TestShadowApart(t *testing.T) {
	st := newStore()
	enforced, shadow := fixed("enforced", 2), fixed("shadow", 1)
	var got []bool
	for range 3 {
		checks := []Check{check(enforced, "k", 1, 0), check(shadow, "k", 1, Shadow)}
		out, res := decide(t, st, checks, false)
		got = append(got, out.Allowed, res[1].Allowed, checks[1].Flags&Exhausted != 0)
	}
	// admitted and charged; admitted, the shadow would have denied; denied,
	// the shadow peeked at and would have denied (it has nothing left).
	want := []bool{true, true, false, true, false, true, false, false, true}
	if !slices.Equal(got, want) {
		t.Fatalf("allowed, shadow allowed, shadow exhausted: %v, want %v", got, want)
	}
	if r := remaining(t, st, shadow, "k"); r != 0 {
		t.Errorf("shadow has %d left, want 0", r)
	}
}

// TestBan: an enforced ban with a cost blocks the request without reaching
// the store for it; the others are only peeked at, in one call.
func TestBan(t *testing.T) {
	st := newStore()
	p, q, ban := fixed("p", 5), fixed("q", 5), &sluice.Policy{Name: "ban"}
	checks := []Check{check(p, "k", 1, 0), check(ban, "k", 1, Ban), check(q, "k", 1, Shadow)}
	out, res := decide(t, st, checks, false)
	if out.Allowed || !out.Blocked || res[0].Allowed || res[0].Remaining != 5 || res[1] != (sluice.Result{}) || res[2].Remaining != 5 {
		t.Fatalf("banned: %+v %+v", out, res)
	}
	if st.calls != 1 {
		t.Errorf("%d store calls, want one peek for both others", st.calls)
	}
	if checks[1].Flags&Exhausted == 0 || checks[0].Flags&Exhausted != 0 {
		t.Errorf("flags %v %v, want the ban exhausted and p not", checks[0].Flags, checks[1].Flags)
	}
	// A shadow ban, or a ban peeked at, blocks nothing.
	for _, c := range []Check{check(ban, "k", 1, Ban|Shadow), check(ban, "k", 0, Ban)} {
		out, res := decide(t, st, []Check{check(p, "k", 1, 0), c}, false)
		if !out.Allowed || out.Blocked || !res[0].Allowed || res[1] != (sluice.Result{}) {
			t.Errorf("%v: %+v %+v, want admitted", c.Flags, out, res)
		}
	}
}

// TestOverCapacity: an enforced check over capacity blocks the request; a
// shadow one is peeked at and would have denied.
func TestOverCapacity(t *testing.T) {
	st := newStore()
	p, small := fixed("p", 5), fixed("small", 2)
	out, _ := decide(t, st, []Check{check(p, "k", 1, 0), check(small, "k", 3, OverCapacity)}, false)
	if out.Allowed || !out.Blocked || remaining(t, st, p, "k") != 5 {
		t.Fatalf("enforced over capacity: %+v, p has %d left", out, remaining(t, st, p, "k"))
	}
	checks := []Check{check(p, "k", 1, 0), check(small, "k", 3, OverCapacity|Shadow)}
	out, res := decide(t, st, checks, false)
	if !out.Allowed || res[1].Allowed || checks[1].Flags&Exhausted == 0 || remaining(t, st, small, "k") != 2 {
		t.Fatalf("shadow over capacity: %+v %+v %v", out, res, checks[1].Flags)
	}
}

// TestQuota: quota-mode checks do not deny while one has room; when none
// has, the request is denied before anything is charged.
func TestQuota(t *testing.T) {
	st := newStore()
	p, qa, qb := fixed("p", 10), fixed("qa", 1), fixed("qb", 2)
	req := func() ([]Check, Outcome) {
		checks := []Check{check(p, "k", 1, 0), check(qa, "k", 1, Shadow|Quota), check(qb, "k", 1, Shadow|Quota)}
		out, _ := decide(t, st, checks, false)
		return checks, out
	}
	var allowed []bool
	for range 3 {
		checks, out := req()
		allowed = append(allowed, out.Allowed, checks[1].Flags&Exhausted != 0)
	}
	if want := []bool{true, false, true, true, false, true}; !slices.Equal(allowed, want) {
		t.Fatalf("allowed, qa exhausted: %v, want %v", allowed, want)
	}
	_, out := req()
	if !out.Blocked || out.QuotaDenied {
		t.Errorf("fourth: %+v, want blocked", out)
	}
	if got := remaining(t, st, p, "k"); got != 8 {
		t.Errorf("p has %d left, want 8: the denied requests charged nothing", got)
	}
}

// TestQuotaRace: when the last quota goes between the peek and the charge,
// the request is denied after the enforced checks were charged.
func TestQuotaRace(t *testing.T) {
	st := newStore()
	q := fixed("q", 1)
	racer := &racingStore{Store: st, take: sluice.Request{Policy: q, Key: "k", Cost: 1}}
	out, _ := decide(t, racer, []Check{check(fixed("p", 5), "k", 1, 0), check(q, "k", 1, Shadow|Quota)}, false)
	if out.Allowed || out.Blocked || !out.QuotaDenied {
		t.Fatalf("%+v, want denied for want of quota", out)
	}
}

// racingStore takes the units of take right after the first peek.
type racingStore struct {
	sluice.Store
	take  sluice.Request
	taken bool
}

func (s *racingStore) Decide(ctx context.Context, r sluice.Request) (sluice.Result, error) {
	res, err := s.Store.Decide(ctx, r)
	if r.Cost == 0 && !s.taken {
		s.taken = true
		_, _ = s.Store.Decide(ctx, s.take)
	}
	return res, err
}

// TestRefused: a refused request is denied, every check only peeked at.
func TestRefused(t *testing.T) {
	st := newStore()
	p := fixed("p", 5)
	if out, res := decide(t, st, []Check{check(p, "k", 1, 0)}, true); out.Allowed || !out.Blocked || res[0].Remaining != 5 {
		t.Fatalf("%+v %+v", out, res)
	}
	if out, _ := decide(t, st, nil, false); !out.Allowed {
		t.Error("no checks: denied")
	}
	if out, _ := decide(t, st, nil, true); out.Allowed {
		t.Error("no checks, refused: admitted")
	}
}

// TestStoreErrors: a failure of the enforced checks is the decision's; a
// shadow check's fails nothing and is reported.
func TestStoreErrors(t *testing.T) {
	down := errors.New("down")
	p := fixed("p", 5)
	res := make([]sluice.Result, 1)
	if _, err := Decide(context.Background(), failing{down}, []Check{check(p, "k", 1, 0)}, res, false); !errors.Is(err, down) {
		t.Fatalf("enforced: %v", err)
	}
	st := &shadowFailing{Store: newStore(), err: down}
	checks := []Check{check(p, "k", 1, 0), check(fixed("s", 5), "k", 1, Shadow)}
	out, res2 := decide(t, st, checks, false)
	if !out.Allowed || len(out.ShadowErrors) != 1 || out.ShadowErrors[0].Index != 1 || !errors.Is(out.ShadowErrors[0].Err, down) ||
		checks[1].Flags&Failed == 0 || res2[1] != (sluice.Result{}) {
		t.Fatalf("shadow failure: %+v %+v %v", out, res2, checks[1].Flags)
	}
}

type failing struct{ err error }

func (f failing) Decide(context.Context, sluice.Request) (sluice.Result, error) {
	return sluice.Result{}, f.err
}

func (f failing) DecideAll(context.Context, []sluice.Request, []sluice.Result) error { return f.err }

// shadowFailing fails the calls for policy "s".
type shadowFailing struct {
	sluice.Store
	err error
}

func (s *shadowFailing) Decide(ctx context.Context, r sluice.Request) (sluice.Result, error) {
	if r.Policy.Name == "s" {
		return sluice.Result{}, s.err
	}
	return s.Store.Decide(ctx, r)
}
