package sluice_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

const year = 365 * 24 * time.Hour

// A sliding log keeps one entry per admitted unit, so its limit is its
// state's size: above the cap the policy is refused, with the size in bytes.
func TestValidateCapsSlidingLog(t *testing.T) {
	for _, c := range []struct {
		limit int64
		want  []string // in the error; none: valid
	}{
		{1, nil},
		{sluice.MaxSlidingLogLimit, nil},
		{sluice.MaxSlidingLogLimit + 1, []string{"limit 10001", "260 kB per key in Redis", "cap of 10000", "sliding_window or gcra"}},
		{100_000, []string{"limit 100000 would hold up to 2.6 MB per key in Redis (2.1 MB in memory)"}},
		{9e15, []string{"limit 9000000000000000", "GB per key in Redis"}},
	} {
		p := sluice.Policy{Name: "log", Algorithm: sluice.SlidingLog, Limit: c.limit, Period: year}
		err := p.Validate()
		if c.want == nil {
			if err != nil {
				t.Errorf("limit %d: %v", c.limit, err)
			}
			continue
		}
		var pe *sluice.PolicyError
		if !errors.As(err, &pe) || pe.Field != "Limit" {
			t.Errorf("limit %d: got %v, want a Limit error", c.limit, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("limit %d: %q does not say %q", c.limit, err, w)
			}
		}
	}
}

// Warning flags sliding logs above SlidingLogWarnLimit, and nothing else.
func TestPolicyWarning(t *testing.T) {
	for _, a := range sluice.Algorithms {
		for _, limit := range []int64{sluice.SlidingLogWarnLimit, sluice.SlidingLogWarnLimit + 1, sluice.MaxSlidingLogLimit} {
			p := sluice.Policy{Name: "p", Algorithm: a, Limit: limit, Period: time.Hour}
			w := p.Warning()
			wantWarning := a == sluice.SlidingLog && limit > sluice.SlidingLogWarnLimit
			if (w != "") != wantWarning {
				t.Errorf("%s limit %d: warning %q, want one: %v", a, limit, w, wantWarning)
			}
		}
	}
	p := sluice.Policy{Name: "p", Algorithm: sluice.SlidingLog, Limit: 5000, Period: time.Hour}
	if w := p.Warning(); !strings.Contains(w, "limit 5000 can hold up to 130 kB per key in Redis (131 kB in memory)") {
		t.Errorf("warning %q lacks the size", w)
	}
}

// Absurd limits and periods are refused with an error naming the field, for
// every algorithm, and never panic or overflow.
func TestValidateRefusesAbsurdBounds(t *testing.T) {
	for _, a := range sluice.Algorithms {
		for _, c := range []struct {
			limit  int64
			period time.Duration
			field  string
		}{
			{math.MaxInt64, time.Hour, "Limit"},
			{1 << 53, time.Hour, "Limit"},
			{1, math.MaxInt64 / 1000 * 1000, "Period"},
			{1, 200 * year, "Period"},
			{-1, time.Hour, "Limit"},
			{1, -time.Hour, "Period"},
		} {
			p := sluice.Policy{Name: "p", Algorithm: a, Limit: c.limit, Period: c.period}
			var pe *sluice.PolicyError
			if err := p.Validate(); !errors.As(err, &pe) || pe.Field != c.field {
				t.Errorf("%s %d per %v: got %v, want a %s error", a, c.limit, c.period, err, c.field)
			}
		}
	}
}
