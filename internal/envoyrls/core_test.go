package envoyrls

import (
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
)

// The core behaviour, run against every store.

func TestCoreMemory(t *testing.T) { testCore(t, openMemory) }

func TestCoreRedis(t *testing.T) { testCore(t, redisOpener(t)) }

func testCore(t *testing.T, open opener) {
	t.Run("BasicLimit", func(t *testing.T) { testBasicLimit(t, open) })
	t.Run("AllOrNothing", func(t *testing.T) { testAllOrNothing(t, open) })
	t.Run("HitsAddend", func(t *testing.T) { testHitsAddend(t, open) })
	t.Run("CapacityExceeded", func(t *testing.T) { testCapacityExceeded(t, open) })
	t.Run("DuplicateMerged", func(t *testing.T) { testDuplicateMerged(t, open) })
	t.Run("Shadow", func(t *testing.T) { testShadow(t, open) })
	t.Run("SeveralLimits", func(t *testing.T) { testSeveralLimits(t, open) })
	t.Run("Replaces", func(t *testing.T) { testReplaces(t, open) })
}

func testBasicLimit(t *testing.T, open opener) {
	e := newEnv(t, open, newConfig(domain("api",
		node("user", "", limits(pol("per_user", 3, time.Minute))))))
	resp := e.call("api", 0, desc("user", "alice"))
	checkStatuses(t, resp, codeOK, ok("per_user", 2))
	st := resp.Statuses[0]
	if l := st.CurrentLimit; l.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE || l.RequestsPerUnit != 3 {
		t.Fatalf("current_limit %v, want 3 per MINUTE", l)
	}
	if d := st.DurationUntilReset.AsDuration(); d != 45*time.Second {
		t.Fatalf("duration_until_reset %v, want 45s (the clock is 15s into the minute)", d)
	}
	checkStatuses(t, e.call("api", 0, desc("user", "alice")), codeOK, ok("per_user", 1))
	checkStatuses(t, e.call("api", 0, desc("user", "alice")), codeOK, ok("per_user", 0))
	checkStatuses(t, e.call("api", 0, desc("user", "alice")), codeOverLimit, over("per_user", 0))
	checkStatuses(t, e.call("api", 0, desc("user", "bob")), codeOK, ok("per_user", 2))
	e.clock.Advance(45 * time.Second) // the next window
	checkStatuses(t, e.call("api", 0, desc("user", "alice")), codeOK, ok("per_user", 2))
}

// testAllOrNothing: a request denied by one descriptor's limit consumes
// nothing from the other's, whatever its algorithm.
func testAllOrNothing(t *testing.T, open opener) {
	for _, a := range []sluice.Algorithm{sluice.FixedWindow, sluice.SlidingWindow, sluice.SlidingLog,
		sluice.TokenBucket, sluice.LeakyBucket, sluice.GCRA} {
		t.Run(string(a), func(t *testing.T) {
			e := newEnv(t, open, newConfig(domain("api",
				node("user", "", limits(pol("user", 5, time.Minute, algorithm(a)))),
				node("global", "", limits(pol("global", 2, time.Minute))))))
			both := func() *rlsv3.RateLimitResponse {
				return e.call("api", 0, desc("user", "alice"), desc("global", "all"))
			}
			for i := range 2 {
				if r := both(); r.OverallCode != codeOK {
					t.Fatalf("request %d: %v, want OK", i, r)
				}
			}
			before := e.remaining("api", "user", "alice")
			resp := both() // the global limit is exhausted
			checkStatuses(t, resp, codeOverLimit, ok("user", before), over("global", 0))
			if after := e.remaining("api", "user", "alice"); after != before {
				t.Fatalf("the denied request consumed from the user limit: remaining %d, was %d", after, before)
			}
		})
	}
	// A limit with exactly enough left is not one of the denying ones.
	e := newEnv(t, open, newConfig(domain("api",
		node("user", "", limits(pol("user", 3, time.Minute))),
		node("global", "", limits(pol("global", 2, time.Minute))))))
	checkStatuses(t, e.call("api", 1, desc("user", "bob"), desc("global", "all")), codeOK, ok("user", 2), ok("global", 1))
	checkStatuses(t, e.call("api", 2, desc("user", "bob"), desc("global", "all")), codeOverLimit, ok("user", 2), over("global", 0))
}

func testHitsAddend(t *testing.T, open opener) {
	e := newEnv(t, open, newConfig(domain("api",
		node("user", "", limits(pol("u", 10, time.Minute))))))
	// The request's hits_addend.
	checkStatuses(t, e.call("api", 3, desc("user", "a")), codeOK, ok("u", 7))
	// The descriptor's overrides the request's.
	checkStatuses(t, e.call("api", 5, withHits(desc("user", "a"), 2)), codeOK, ok("u", 5))
	// Mixed in one request: each descriptor its own cost.
	checkStatuses(t, e.call("api", 2, withHits(desc("user", "b"), 4), desc("user", "c")), codeOK,
		ok("u", 6), ok("u", 8))
	// An explicit 0 on the descriptor is a peek, even with the request's set.
	checkStatuses(t, e.call("api", 3, withHits(desc("user", "a"), 0)), codeOK, ok("u", 5))
	// A refund cannot be honoured; it is a peek too.
	refund := withHits(desc("user", "a"), 2)
	refund.IsNegativeHits = true
	checkStatuses(t, e.call("api", 0, refund), codeOK, ok("u", 5))
	// A peek at an exhausted limit is not OVER_LIMIT: it asks for nothing.
	e.call("api", 5, desc("user", "a"))
	checkStatuses(t, e.call("api", 0, withHits(desc("user", "a"), 0)), codeOK, ok("u", 0))
	checkStatuses(t, e.call("api", 0, desc("user", "a")), codeOverLimit, over("u", 0))
}

// testCapacityExceeded: a cost no limit can ever admit denies the request
// without an error and consumes nothing anywhere.
func testCapacityExceeded(t *testing.T, open opener) {
	e := newEnv(t, open, newConfig(domain("api",
		node("user", "", limits(pol("u", 10, time.Minute))),
		node("global", "", limits(pol("g", 100, time.Minute))),
		node("shadowed", "", limits(pol("s", 1, time.Minute, shadow))))))
	resp := e.call("api", 0, withHits(desc("user", "a"), 11), desc("global", "all"))
	checkStatuses(t, resp, codeOverLimit, over("u", 0), ok("g", 100))
	if got := e.remaining("api", "user", "a"); got != 10 {
		t.Fatalf("user remaining %d after the denial, want 10", got)
	}
	if got := e.remaining("api", "global", "all"); got != 100 {
		t.Fatalf("global remaining %d after the denial, want 100", got)
	}
	// A huge cost (beyond int64) is still just over capacity.
	resp = e.call("api", 0, withHits(desc("user", "a"), 1<<63+5))
	checkStatuses(t, resp, codeOverLimit, over("u", 0))
	// A shadow limit never denies, even a cost it could never admit.
	resp = e.call("api", 0, withHits(desc("shadowed", "x"), 5), desc("global", "all"))
	checkStatuses(t, resp, codeOK, ok("s", 1), ok("g", 99))
}

// testDuplicateMerged: one (limit, key) from two descriptors is one check of
// their summed cost, reported on both.
func testDuplicateMerged(t *testing.T, open opener) {
	e := newEnv(t, open, newConfig(domain("api",
		node("user", "", limits(pol("u", 5, time.Minute))),
		node("tenant", "", nil, node("user", "", limits(pol("u2", 50, time.Minute)))))))
	checkStatuses(t, e.call("api", 0, desc("user", "a"), desc("user", "a")), codeOK, ok("u", 3), ok("u", 3))
	// 2+2 > 3 left: both denied, nothing consumed.
	checkStatuses(t, e.call("api", 2, desc("user", "a"), desc("user", "a")), codeOverLimit, over("u", 0), over("u", 0))
	if got := e.remaining("api", "user", "a"); got != 3 {
		t.Fatalf("remaining %d, want 3", got)
	}
	// Different values of one path are different keys.
	checkStatuses(t, e.call("api", 0, desc("tenant", "t", "user", "a"), desc("tenant", "t", "user", "b")), codeOK,
		ok("u2", 49), ok("u2", 49))
}

// testShadow: a shadow limit over its limit lets the request through, reports
// OK, and is charged nothing when another limit denies.
func testShadow(t *testing.T, open opener) {
	e := newEnv(t, open, newConfig(domain("api",
		node("user", "", limits(pol("s", 1, time.Minute, shadow))),
		node("global", "", limits(pol("g", 1, time.Minute))))))
	checkStatuses(t, e.call("api", 0, desc("user", "a")), codeOK, ok("s", 0))
	checkStatuses(t, e.call("api", 0, desc("user", "a")), codeOK, ok("s", 0))
	checkStatuses(t, e.call("api", 0, desc("user", "b"), desc("global", "x")), codeOK, ok("s", 0), ok("g", 0))
	checkStatuses(t, e.call("api", 0, desc("user", "c"), desc("global", "x")), codeOverLimit, ok("s", 1), over("g", 0))
	if got := e.remaining("api", "user", "c"); got != 1 {
		t.Fatalf("the shadow limit was charged for a denied request: remaining %d, want 1", got)
	}
}

// testSeveralLimits: a descriptor with several limits (Sluice's extension)
// reports the most restrictive one.
func testSeveralLimits(t *testing.T, open opener) {
	e := newEnv(t, open, newConfig(domain("api",
		node("user", "", limits(pol("burst", 2, time.Second), pol("hourly", 5, time.Hour))),
		node("key", "", limits(pol("enforced", 10, time.Minute), pol("watching", 1, time.Minute, shadow))))))
	call := func() *rlsv3.RateLimitResponse { return e.call("api", 0, desc("user", "a")) }
	checkStatuses(t, call(), codeOK, ok("burst", 1))          // hourly 4
	checkStatuses(t, call(), codeOK, ok("burst", 0))          // hourly 3
	checkStatuses(t, call(), codeOverLimit, over("burst", 0)) // hourly still 3
	e.clock.Advance(time.Second)
	checkStatuses(t, call(), codeOK, ok("burst", 1)) // hourly 2
	checkStatuses(t, call(), codeOK, ok("burst", 0)) // hourly 1
	e.clock.Advance(time.Second)
	checkStatuses(t, call(), codeOK, ok("hourly", 0))          // burst 1
	checkStatuses(t, call(), codeOverLimit, over("hourly", 0)) // burst 1 but hourly denies
	// An enforced limit is reported before a shadow one with less remaining.
	checkStatuses(t, e.call("api", 0, desc("key", "k")), codeOK, ok("enforced", 9))
	checkStatuses(t, e.call("api", 0, desc("key", "k")), codeOK, ok("enforced", 8))
}

// testReplaces: a limit named in another matched limit's replaces is neither
// decided nor reported.
func testReplaces(t *testing.T, open opener) {
	e := newEnv(t, open, newConfig(domain("api",
		node("path", "/a", limits(pol("a", 5, time.Minute, ruleName("a_rule")))),
		node("tenant", "", limits(pol("t", 100, time.Minute, ruleName("t_rule"), replaces("a_rule")))),
		node("both", "", limits(pol("b1", 5, time.Minute, ruleName("b1_rule")),
			pol("b2", 7, time.Minute, ruleName("b2_rule"), replaces("b1_rule")))))))
	checkStatuses(t, e.call("api", 0, desc("path", "/a"), desc("tenant", "x")), codeOK, noLimit, ok("t_rule", 99))
	if got := e.remaining("api", "path", "/a"); got != 5 {
		t.Fatalf("the replaced limit was charged: remaining %d, want 5", got)
	}
	// Alone, nothing replaces it.
	checkStatuses(t, e.call("api", 0, desc("path", "/a")), codeOK, ok("a_rule", 4))
	// Within one descriptor too.
	checkStatuses(t, e.call("api", 0, desc("both", "x")), codeOK, ok("b2_rule", 6))
}
