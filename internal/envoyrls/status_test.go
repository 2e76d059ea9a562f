package envoyrls

import (
	"math"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// TestStatusFields compares whole responses: every field of every status.
func TestStatusFields(t *testing.T) {
	e := newEnv(t, openMemory, newConfig(domain("api",
		node("user", "", limits(pol("per_user", 3, time.Minute))),
		node("ip", "", limits(pol("per_ip", 10, 10*time.Second))),
		node("free", "", nil))))
	status := func(code rlsv3.RateLimitResponse_Code, name string, unit rlsv3.RateLimitResponse_RateLimit_Unit, rpu, remaining uint32, reset time.Duration) *rlsv3.RateLimitResponse_DescriptorStatus {
		return &rlsv3.RateLimitResponse_DescriptorStatus{
			Code:               code,
			CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{Name: name, Unit: unit, RequestsPerUnit: rpu},
			LimitRemaining:     remaining,
			DurationUntilReset: durationpb.New(reset),
		}
	}
	const minute = rlsv3.RateLimitResponse_RateLimit_MINUTE
	// 16.5s: as envoyproxy/ratelimit, the time left in the window counts from
	// the current second: 44s in the minute, 4s in the 10s window.
	e.clock.Advance(1500 * time.Millisecond)
	req := func() *rlsv3.RateLimitResponse {
		return e.call("api", 0, withHits(desc("user", "a"), 2), desc("ip", "10.0.0.1"), desc("free", "x"))
	}
	want := &rlsv3.RateLimitResponse{
		OverallCode: codeOK,
		Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
			status(codeOK, "per_user", minute, 3, 1, 44*time.Second),
			// 10 per 10s is reported as 60 per MINUTE: the smallest unit
			// at least as long as the period, and the same rate.
			status(codeOK, "per_ip", minute, 60, 9, 4*time.Second),
			{Code: codeOK},
		},
	}
	if got := req(); !proto.Equal(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
	// per_user has 1 left, the request asks 2: only its descriptor is
	// OVER_LIMIT, with nothing left (as envoyproxy/ratelimit); per_ip reports
	// its unchanged state.
	want.OverallCode = codeOverLimit
	want.Statuses[0].Code, want.Statuses[0].LimitRemaining = codeOverLimit, 0
	if got := req(); !proto.Equal(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}

func TestRateOf(t *testing.T) {
	const (
		second = rlsv3.RateLimitResponse_RateLimit_SECOND
		minute = rlsv3.RateLimitResponse_RateLimit_MINUTE
		hour   = rlsv3.RateLimitResponse_RateLimit_HOUR
		dayU   = rlsv3.RateLimitResponse_RateLimit_DAY
		week   = rlsv3.RateLimitResponse_RateLimit_WEEK
		month  = rlsv3.RateLimitResponse_RateLimit_MONTH
		year   = rlsv3.RateLimitResponse_RateLimit_YEAR
	)
	cases := []struct {
		limit  int64
		period time.Duration
		unit   rlsv3.RateLimitResponse_RateLimit_Unit
		rpu    uint32
	}{
		{5, time.Second, second, 5},
		{5, time.Minute, minute, 5},
		{5, time.Hour, hour, 5},
		{5, day, dayU, 5},
		{5, 7 * day, week, 5},
		{5, 30 * day, month, 5},
		{5, 365 * day, year, 5},
		{5, 500 * time.Millisecond, second, 10},
		{10, 10 * time.Second, minute, 60},
		{7, 90 * time.Second, hour, 280}, // floor(7 × 3600/90)
		{1, 90 * time.Minute, dayU, 16},
		{3, 7 * time.Second, minute, 25}, // floor(3 × 60/7)
		{1, 2 * 365 * day, year, 1},      // 0.5 per year, at least 1
		{10, 2 * 365 * day, year, 5},
		{math.MaxUint32 + 1, time.Second, second, math.MaxUint32},
		{1 << 52, time.Millisecond, second, math.MaxUint32},
		{0, time.Minute, minute, 0}, // an override of 0
	}
	for _, c := range cases {
		p := &config.Policy{Policy: sluice.Policy{Limit: c.limit, Period: c.period}}
		unit, rpu := rateOf(p)
		if unit != c.unit || rpu != c.rpu {
			t.Errorf("%d per %v: %d per %v, want %d per %v", c.limit, c.period, rpu, unit, c.rpu, c.unit)
		}
	}
}

func TestStoreKey(t *testing.T) {
	entries := func(values ...string) []config.Entry {
		var es []config.Entry
		for _, v := range values {
			es = append(es, config.Entry{Key: "k", Value: v})
		}
		return es
	}
	cases := []struct {
		values []string
		key    string
	}{
		{[]string{"alice"}, "alice"},
		{[]string{"a", "b"}, "a|b"},
		{[]string{"a|b"}, `a\|b`},
		{[]string{`a\`, "b"}, `a\\|b`},
		{[]string{`a`, `\|b`}, `a|\\\|b`},
		{[]string{""}, `\`},
		{[]string{"", ""}, "|"},
		{[]string{`\`}, `\\`},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		got := storeKey(entries(c.values...))
		if got != c.key {
			t.Errorf("storeKey(%q) = %q; want %q", c.values, got, c.key)
		}
		if seen[got] {
			t.Errorf("storeKey(%q) = %q collides", c.values, got)
		}
		seen[got] = true
	}
	long := string(make([]byte, sluice.MaxKeyLen))
	if got := storeKey(entries(long)); got != long {
		t.Errorf("a key of MaxKeyLen bytes is not kept as is")
	}
	// Longer keys are hashed: each distinct from the others, from every
	// plain key, and the same every time.
	for _, vs := range [][]string{{long + "x"}, {long + "y"}, {long, ""}, {long, "", ""}, {"", long}, {long[1:] + "|"}, {long[1:] + `\`}} {
		got := storeKey(entries(vs...))
		if len(got) > sluice.MaxKeyLen || !strings.HasPrefix(got, hashedPrefix) || storeKey(entries(vs...)) != got {
			t.Errorf("a key over MaxKeyLen (%d values): %q", len(vs), got)
		}
		if seen[got] {
			t.Errorf("storeKey of %d long values collides", len(vs))
		}
		seen[got] = true
	}
	// A value that spells a hashed key is escaped, so it stays distinct.
	if got := storeKey(entries(hashedPrefix + "00")); got == hashedPrefix+"00" {
		t.Errorf("the plain value %q is its own key, which looks hashed", got)
	}
}

// TestStoreKeyAllocs: the common single value costs nothing, and any other
// key one allocation.
func TestStoreKeyAllocs(t *testing.T) {
	one := []config.Entry{{Key: "user", Value: "alice"}}
	three := []config.Entry{{Key: "a", Value: "x|y"}, {Key: "b", Value: "z"}, {Key: "c", Value: `w\`}}
	if n := testing.AllocsPerRun(100, func() { _ = storeKey(one) }); n != 0 {
		t.Errorf("single value: %v allocs, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = storeKey(three) }); n != 1 {
		t.Errorf("three values: %v allocs, want 1", n)
	}
}
