package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testwait"
)

// openMemory opens a library target on memory:// with the given policy.
// token_bucket with a long period rather than fixed_window: a fixed window
// aligned to the epoch could roll over mid-test and admit twice the limit,
// while a bucket refills one unit per period/limit (hours here, for the small limits the counting tests use), so the
// admitted count is exact however the test is scheduled.
func openMemory(t *testing.T, limit int64) Target {
	t.Helper()
	tg, err := Open("memory://", TargetConfig{Algorithm: sluice.TokenBucket, Limit: limit, Period: 1000 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	return tg
}

func checkSummary(t *testing.T, s Summary) {
	t.Helper()
	if s.Allowed+s.Denied+s.Errors != s.Requests {
		t.Errorf("allowed %d + denied %d + errors %d != requests %d", s.Allowed, s.Denied, s.Errors, s.Requests)
	}
	if !(s.Min <= s.P50 && s.P50 <= s.P90 && s.P90 <= s.P99 && s.P99 <= s.P999 && s.P999 <= s.Max) {
		t.Errorf("percentiles out of order: min %v p50 %v p90 %v p99 %v p999 %v max %v", s.Min, s.P50, s.P90, s.P99, s.P999, s.Max)
	}
	if s.Decisions() > 0 && (s.P50 <= 0 || s.Throughput <= 0) {
		t.Errorf("p50 %v, throughput %v: want positive", s.P50, s.Throughput)
	}
	if s.Errors > 0 && s.ErrorRate <= 0 {
		t.Errorf("%d errors at %v/s: want a positive rate", s.Errors, s.ErrorRate)
	}
}

// downTarget fails every call, as a target that is not running does.
type downTarget struct{}

func (downTarget) Call(context.Context, string) (bool, error) {
	return false, errors.New("connection refused")
}

func (downTarget) Close() {}

// TestRunDownTarget: a target that fails every call has no throughput and no
// latencies — the failures are counted as errors, at their own rate.
func TestRunDownTarget(t *testing.T) {
	s, err := Run(t.Context(), Options{Target: downTarget{}, Concurrency: 4, Requests: 1000})
	if err != nil {
		t.Fatal(err)
	}
	checkSummary(t, s)
	if s.Requests != 1000 || s.Errors != 1000 || s.Decisions() != 0 || s.FirstError != "connection refused" {
		t.Fatalf("summary %+v; want 1000 errors and no decision", s)
	}
	if s.Throughput != 0 || s.P50 != 0 || s.Max != 0 {
		t.Errorf("throughput %v, p50 %v, max %v with no decision: want 0", s.Throughput, s.P50, s.Max)
	}
}

func TestRunCountsExactlyWhatThePolicyAdmits(t *testing.T) {
	s, err := Run(t.Context(), Options{Target: openMemory(t, 100), Concurrency: 16, Keys: 1, Requests: 5000})
	if err != nil {
		t.Fatal(err)
	}
	checkSummary(t, s)
	if s.Requests != 5000 || s.Allowed != 100 || s.Denied != 4900 || s.Errors != 0 {
		t.Fatalf("got %+v; want 5000 requests, 100 allowed, 4900 denied", s)
	}
}

func TestRunHotKey(t *testing.T) {
	// Every call on the hot key: one key admits 10, the 1000 others are never
	// touched.
	s, err := Run(t.Context(), Options{Target: openMemory(t, 10), Concurrency: 4, Keys: 1000, Hot: 1, Requests: 300})
	if err != nil {
		t.Fatal(err)
	}
	checkSummary(t, s)
	if s.Allowed != 10 || s.Denied != 290 {
		t.Fatalf("got %+v; want 10 allowed, 290 denied", s)
	}
}

func TestRunDuration(t *testing.T) {
	before := runtime.NumGoroutine()
	var progress bytes.Buffer
	s, err := Run(t.Context(), Options{Target: openMemory(t, 1_000_000), Concurrency: 8, Duration: 300 * time.Millisecond,
		Progress: &progress, ProgressEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkSummary(t, s)
	if s.Elapsed < 300*time.Millisecond || s.Elapsed > 2*time.Second {
		t.Errorf("elapsed %v; want just over 300ms", s.Elapsed)
	}
	if s.Requests == 0 || s.Errors != 0 {
		t.Errorf("got %+v", s)
	}
	if !strings.Contains(progress.String(), "decisions/s") {
		t.Errorf("no progress lines: %q", progress.String())
	}
	waitGoroutines(t, before)
}

// slowTarget blocks each call until ctx ends or release is closed, to test
// cancellation with calls in flight.
type slowTarget struct {
	calls   atomic.Int64
	release chan struct{}
}

func (s *slowTarget) Call(ctx context.Context, key string) (bool, error) {
	s.calls.Add(1)
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-s.release:
		return true, nil
	}
}

func (s *slowTarget) Close() {}

func TestRunStopsPromptlyOnCancel(t *testing.T) {
	before := runtime.NumGoroutine()
	tg := &slowTarget{release: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	s, err := Run(ctx, Options{Target: tg, Concurrency: 8, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Run took %v after cancel at 100ms", d)
	}
	// The cut-short calls measured nothing and are not counted as errors.
	if s.Requests != 0 || s.Errors != 0 {
		t.Fatalf("got %+v; want nothing counted", s)
	}
	if tg.calls.Load() != 8 {
		t.Fatalf("%d calls started; want one per worker", tg.calls.Load())
	}
	waitGoroutines(t, before)
}

// countTarget allows every call and fails every third, to check the request
// cap and the error accounting without a limiter.
type countTarget struct{ n atomic.Int64 }

func (c *countTarget) Call(ctx context.Context, key string) (bool, error) {
	if c.n.Add(1)%3 == 0 {
		return false, errors.New("boom")
	}
	return true, nil
}

func (c *countTarget) Close() {}

func TestRunRequestCapAndErrors(t *testing.T) {
	tg := &countTarget{}
	s, err := Run(t.Context(), Options{Target: tg, Concurrency: 32, Requests: 3000})
	if err != nil {
		t.Fatal(err)
	}
	checkSummary(t, s)
	if tg.n.Load() != 3000 || s.Requests != 3000 || s.Errors != 1000 || s.Allowed != 2000 || s.FirstError != "boom" {
		t.Fatalf("target called %d times, summary %+v; want 3000 calls, 2000 allowed, 1000 errors (boom)", tg.n.Load(), s)
	}
}

// keyTarget records the keys it sees.
type keyTarget struct {
	mu   sync.Mutex
	seen map[string]int
}

func (k *keyTarget) Call(ctx context.Context, key string) (bool, error) {
	k.mu.Lock()
	k.seen[key]++
	k.mu.Unlock()
	return true, nil
}

func (k *keyTarget) Close() {}

func TestRunKeyChoice(t *testing.T) {
	tg := &keyTarget{seen: map[string]int{}}
	if _, err := Run(t.Context(), Options{Target: tg, Concurrency: 4, Keys: 5, Hot: 0.5, Requests: 4000, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if len(tg.seen) != 6 {
		t.Fatalf("keys seen %v; want k0..k4 and hot", tg.seen)
	}
	if h := tg.seen[HotKey]; h < 1700 || h > 2300 {
		t.Errorf("hot key got %d of 4000 calls; want about half", h)
	}
}

// TestRunZipf: with --keys-dist zipf the first keys take most calls, in
// Zipf's proportions, and every call still goes to one of the keys.
func TestRunZipf(t *testing.T) {
	tg := &keyTarget{seen: map[string]int{}}
	const calls = 40000
	if _, err := Run(t.Context(), Options{Target: tg, Concurrency: 4, Keys: 10000, Dist: Zipf, Requests: calls, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	// P(k0) = 1/H(10000, 1.1) ≈ 0.152, P(k9) = P(k0)/10^1.1 ≈ 0.012.
	for _, c := range []struct {
		key    string
		lo, hi int
	}{{"k0", 5600, 6600}, {"k9", 370, 610}} {
		if n := tg.seen[c.key]; n < c.lo || n > c.hi {
			t.Errorf("%s got %d of %d calls, want %d to %d", c.key, n, calls, c.lo, c.hi)
		}
	}
	var total int
	for k, n := range tg.seen {
		if !strings.HasPrefix(k, "k") {
			t.Errorf("a call on %q", k)
		}
		total += n
	}
	if total != calls || len(tg.seen) > 9000 {
		t.Errorf("%d calls on %d keys, want %d calls on far fewer than 10,000 keys", total, len(tg.seen), calls)
	}
}

func TestRunRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{
		{},
		{Target: &countTarget{}, Hot: 1.5},
		{Target: &countTarget{}, Dist: "pareto"},
		{Target: &countTarget{}, Dist: Zipf, ZipfS: 1},
		{Target: &countTarget{}, Concurrency: -1},
		{Target: &countTarget{}, Requests: -1},
	} {
		if _, err := Run(t.Context(), o); err == nil {
			t.Errorf("Run(%+v): no error", o)
		}
	}
}

func TestParseDescriptor(t *testing.T) {
	for _, tc := range []struct {
		in      string
		entries []DescriptorEntry
		keyAt   int
	}{
		{"", []DescriptorEntry{{"key", ""}}, 0},
		{"user", []DescriptorEntry{{"user", ""}}, 0},
		{"user=x", []DescriptorEntry{{"user", "x"}}, 0},
		{"tenant=acme,user", []DescriptorEntry{{"tenant", "acme"}, {"user", ""}}, 1},
		{"user={key},path=/api", []DescriptorEntry{{"user", ""}, {"path", "/api"}}, 0},
	} {
		e, k, err := ParseDescriptor(tc.in)
		if err != nil || k != tc.keyAt || len(e) != len(tc.entries) {
			t.Errorf("ParseDescriptor(%q) = %v, %d, %v", tc.in, e, k, err)
			continue
		}
		for i := range e {
			if e[i] != tc.entries[i] {
				t.Errorf("ParseDescriptor(%q) = %v; want %v", tc.in, e, tc.entries)
			}
		}
	}
	for _, bad := range []string{"a,b", "=x", "a=", "a={key},b"} {
		if _, _, err := ParseDescriptor(bad); err == nil {
			t.Errorf("ParseDescriptor(%q): no error", bad)
		}
	}
}

// waitGoroutines fails if goroutines started during the test keep running;
// Run promises none outlives it.
func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	testwait.UntilSaw(t, "the goroutines started by Run ended", func() (bool, string) {
		n := runtime.NumGoroutine()
		return n <= before, fmt.Sprintf("%d goroutines after Run, %d before", n, before)
	})
}
