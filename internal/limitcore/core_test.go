package limitcore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// req is a request as the tests' key functions see it: named fields.
type req map[string]string

func field(name string) KeyFunc[req] {
	return func(r req) (string, error) { return r[name], nil }
}

func TestJoinKeepsPartsApart(t *testing.T) {
	k := Join(field("a"), field("b"))
	seen := map[string]req{}
	for _, r := range []req{
		{"a": "x|y", "b": "z"}, {"a": "x", "b": "y|z"},
		{"a": `x\`, "b": "|z"}, {"a": `x\|`, "b": "z"},
		// Bytes that are not UTF-8 are kept as they are: they must not all
		// become U+FFFD and share one bucket.
		{"a": "\xff", "b": "z"}, {"a": "\xfe", "b": "z"}, {"a": "\ufffd", "b": "z"},
	} {
		key, err := k(r)
		if err != nil || key == "" {
			t.Fatalf("%q: key %q, %v", r, key, err)
		}
		if other, dup := seen[key]; dup {
			t.Fatalf("%q and %q share the key %q", r, other, key)
		}
		seen[key] = r
	}
	if key, err := k(req{"a": "x"}); key != "" || err != nil {
		t.Fatalf("a missing part: key %q, %v; want none", key, err)
	}
	if Join(field("a"), nil) != nil {
		t.Fatal("Join with a zero part is not zero")
	}
}

func TestFitKey(t *testing.T) {
	long := strings.Repeat("k", sluice.MaxKeyLen+1)
	a, b := FitKey(long), FitKey(long+"\xff")
	if len(a) > sluice.MaxKeyLen || len(b) > sluice.MaxKeyLen || a == b {
		t.Fatalf("long keys fit as %q and %q", a, b)
	}
	if k := strings.Repeat("k", sluice.MaxKeyLen); FitKey(k) != k {
		t.Fatal("a key of the maximum length was changed")
	}
}

// newCore builds a core over a memory store on a standing clock with the
// given limits (policy name, limit, key, fallback, shadow) and records shadow
// reports.
func newCore(t *testing.T, limits ...Limit[req]) (*Core[req], *[]string) {
	t.Helper()
	store := memory.New(memory.WithClock(storetest.NewClock(storetest.Epoch)))
	s := NewSettings[req]("testlimit")
	for _, l := range limits {
		lim, err := sluice.New(store, l.Policy)
		if err != nil {
			t.Fatal(err)
		}
		shadow := l.Shadow
		if err := AddLimit(&s, lim, l.Key, "field", func(n *Limit[req]) { n.Fallback, n.Shadow = l.Fallback, shadow }); err != nil {
			t.Fatal(err)
		}
	}
	var reports []string
	c, err := New(&s, func(q []Quota) string { return "" }, func(_ context.Context, _ req, q Quota, denied bool) {
		reports = append(reports, q.Policy.Name+map[bool]string{true: " denied anyway", false: ""}[denied])
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, &reports
}

func policy(name string, limit int64) sluice.Policy {
	return sluice.Policy{Name: name, Algorithm: sluice.FixedWindow, Limit: limit, Period: time.Hour}
}

func TestDecideAllOrNothingAndShadow(t *testing.T) {
	c, reports := newCore(t,
		Limit[req]{Policy: policy("per_user", 2), Key: field("user"), Fallback: field("ip")},
		Limit[req]{Policy: policy("global", 3), Key: func(req) (string, error) { return "all", nil }},
		Limit[req]{Policy: policy("trial", 1), Key: field("user"), Shadow: true},
	)
	ctx := context.Background()
	decide := func(r req) Decision {
		t.Helper()
		d, err := c.Decide(ctx, r, 1)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// A user and an address with the same text are different buckets.
	for i, r := range []req{{"user": "x"}, {"user": "x"}, {"ip": "x"}} {
		if d := decide(r); !d.Allowed || len(d.Quotas) != 2 {
			t.Fatalf("request %d: %+v, want admitted by both limits", i, d)
		}
	}
	// The global limit is full: denied, and per_user of "y" is not charged.
	d := decide(req{"user": "y"})
	if d.Allowed || d.RetryAfter <= 0 || len(d.Violated) != 1 || d.Violated[0].Policy.Name != "global" {
		t.Fatalf("over the global limit: %+v", d)
	}
	if d.Quotas[0].Result.Remaining != 2 {
		t.Fatalf("per_user of y: %d left after a denial, want 2", d.Quotas[0].Result.Remaining)
	}
	// trial (1 per user) would have denied the second request of x, and only
	// peeked at y's denied one, which it had room for.
	if strings.Join(*reports, ",") != "trial" {
		t.Fatalf("shadow reports %q, want one for trial", *reports)
	}
}

// TestDecideZeroCost: a request of cost 0 (a check before work charged
// afterwards) is admitted while every limit has a unit left, consuming
// nothing, and denied once one has none; a shadow limit with none left is
// reported, for the admitted request and for the denied one.
func TestDecideZeroCost(t *testing.T) {
	c, reports := newCore(t,
		Limit[req]{Policy: policy("tokens", 2), Key: field("user")},
		Limit[req]{Policy: policy("trial", 1), Key: field("user"), Shadow: true},
	)
	ctx := context.Background()
	if d, err := c.Decide(ctx, req{"user": "x"}, 0); err != nil || !d.Allowed || d.Quotas[0].Result.Remaining != 2 {
		t.Fatalf("cost 0 on a fresh key: %+v, %v", d, err)
	}
	if d, err := c.Decide(ctx, req{"user": "x"}, 1); err != nil || !d.Allowed {
		t.Fatalf("cost 1: %+v, %v", d, err)
	}
	if d, err := c.Decide(ctx, req{"user": "x"}, 0); err != nil || !d.Allowed {
		t.Fatalf("cost 0 with a unit left: %+v, %v", d, err)
	}
	if strings.Join(*reports, ",") != "trial" {
		t.Fatalf("shadow reports %q, want trial, used up, for the admitted cost 0", *reports)
	}
	if d, err := c.Decide(ctx, req{"user": "x"}, 1); err != nil || !d.Allowed {
		t.Fatalf("the last unit: %+v, %v", d, err)
	}
	d, err := c.Decide(ctx, req{"user": "x"}, 0)
	if err != nil || d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("cost 0 with nothing left: %+v, %v; want denied with a RetryAfter", d, err)
	}
	if got := strings.Join(*reports, ","); got != "trial,trial,trial denied anyway" {
		t.Fatalf("shadow reports %q, want trial used up for the denied cost 0 too", got)
	}
}

func TestDecideKeyError(t *testing.T) {
	boom := errors.New("boom")
	c, _ := newCore(t, Limit[req]{Policy: policy("p", 1), Key: func(req) (string, error) { return "", boom }})
	_, err := c.Decide(context.Background(), req{}, 1)
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), `testlimit: key of limit "p"`) {
		t.Fatalf("err %v", err)
	}
}

// TestPick: a limit decides each request by the limiter Pick returns (a
// plan: the same policy under another limit, on the same state), its own
// when Pick returns nil, and refuses one of another policy.
func TestPick(t *testing.T) {
	store := memory.New(memory.WithClock(storetest.NewClock(storetest.Epoch)))
	own, _ := sluice.New(store, policy("api", 1))
	pro, _ := sluice.New(store, policy("api", 3))
	other, _ := sluice.New(store, policy("other", 9))
	s := NewSettings[req]("testlimit")
	pick := func(r req) *sluice.Limiter {
		return map[string]*sluice.Limiter{"pro": pro, "other": other}[r["plan"]]
	}
	if err := AddLimit(&s, own, field("user"), "field", func(l *Limit[req]) { l.Pick = pick }); err != nil {
		t.Fatal(err)
	}
	c, err := New(&s, func(q []Quota) string { return q[0].Policy.Name + ":" + itoa(q[0].Policy.Limit) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var got []string
	for _, r := range []req{{"user": "a", "plan": "pro"}, {"user": "a", "plan": "pro"}, {"user": "a"}, {"user": "a", "plan": "pro"}, {"user": "a", "plan": "pro"}} {
		d, err := c.Decide(ctx, r, 1)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c.PolicyField(d.Quotas)+map[bool]string{true: " allowed", false: " denied"}[d.Allowed])
	}
	want := []string{"api:3 allowed", "api:3 allowed", "api:1 denied", "api:3 allowed", "api:3 denied"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := c.Decide(ctx, req{"user": "a", "plan": "other"}, 1); err == nil || !strings.Contains(err.Error(), `picked a limiter of policy "other"`) {
		t.Errorf("a limiter of another policy: %v", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestShadowElsewhere: a shadow limit on a store of its own is decided
// there, and one whose capacity is below the cost is reported as a denial
// rather than failing.
func TestShadowElsewhere(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	main, other := memory.New(memory.WithClock(clock)), memory.New(memory.WithClock(clock))
	s := NewSettings[req]("testlimit")
	for _, l := range []struct {
		store  sluice.Store
		policy sluice.Policy
		shadow bool
	}{{main, policy("enforced", 5), false}, {other, policy("trial", 3), true}, {main, policy("tiny", 1), true}} {
		lim, err := sluice.New(l.store, l.policy)
		if err != nil {
			t.Fatal(err)
		}
		shadow := l.shadow
		if err := AddLimit(&s, lim, field("user"), "field", func(n *Limit[req]) { n.Shadow = shadow }); err != nil {
			t.Fatal(err)
		}
	}
	var reports []string
	c, err := New(&s, func([]Quota) string { return "" }, func(_ context.Context, _ req, q Quota, denied bool) {
		reports = append(reports, q.Policy.Name)
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Decide(context.Background(), req{"user": "u"}, 2)
	if err != nil || !d.Allowed {
		t.Fatalf("%+v, %v", d, err)
	}
	trial, _ := sluice.New(other, policy("trial", 3))
	if r, _ := trial.AllowN(context.Background(), "u", 0); r.Remaining != 1 {
		t.Errorf("trial has %d left on its own store, want 1", r.Remaining)
	}
	if strings.Join(reports, ",") != "tiny" {
		t.Errorf("shadow reports %q, want tiny (a cost of 2 over its capacity of 1)", reports)
	}
}
