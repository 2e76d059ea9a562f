package envoyrls

import (
	"path/filepath"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/decide"
)

// Vectors from envoyproxy/ratelimit's documented behaviour and its tests, on
// configurations of the shapes it ships (config/testdata/ratelimit).

func loadRatelimit(t *testing.T, files ...string) *config.Config {
	t.Helper()
	for i, f := range files {
		files[i] = filepath.Join("..", "config", "testdata", "ratelimit", f)
	}
	cfg, err := config.Load(files...)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestReplacedBan: a ban (requests_per_unit: 0) replaced by another matched
// limit bans nothing; the replacing limit alone decides (ratelimit's
// replaces script expects two such requests to pass and the third to be
// limited by the 2 per minute).
func TestReplacedBan(t *testing.T) {
	e := newEnv(t, openMemory, loadRatelimit(t, "replaces.yaml"))
	banned := desc("foo", "foo", "bar", "banned")
	override := desc("source_cluster", "proxy", "destination_cluster", "override")
	checkStatuses(t, e.call("shapes-replaces", 0, banned), codeOverLimit, over("banned_limit", 0))
	checkStatuses(t, e.call("shapes-replaces", 0, banned, override), codeOK, noLimit, ok(anonymous, 1))
	checkStatuses(t, e.call("shapes-replaces", 0, override, banned), codeOK, ok(anonymous, 0), noLimit)
	checkStatuses(t, e.call("shapes-replaces", 0, banned, override), codeOverLimit, noLimit, over(anonymous, 0))
	// The ban still holds where nothing replaces it.
	checkStatuses(t, e.call("shapes-replaces", 0, banned, desc("foo", "x")), codeOverLimit, over("banned_limit", 0), ok(anonymous, 2))
}

// TestRatelimitStatuses: current_limit.name is the YAML name (empty when
// unset); an unlimited descriptor reports 4294967295 remaining and no limit;
// duration_until_reset is the time to the end of the window, for a ban and
// for a peek at a fresh key too.
func TestRatelimitStatuses(t *testing.T) {
	e := newEnv(t, openMemory, loadRatelimit(t, "replaces.yaml"))
	// The clock is 15s into the minute.
	resp := e.call("shapes-replaces", 0, desc("foo", "foo", "bar", "banned"), desc("foo", "foo", "bar", "x"), desc("foo", "foo", "bay", "y"),
		withHits(desc("foo", "fresh"), 0))
	checkStatuses(t, resp, codeOverLimit, over("banned_limit", 0), ok(anonymous, 3), unlimitedStatus, ok(anonymous, 2))
	for _, i := range []int{0, 3} {
		if got := resp.Statuses[i].DurationUntilReset.AsDuration(); got != 45*time.Second {
			t.Errorf("status %d: duration_until_reset %v, want 45s", i, got)
		}
	}
	if l := resp.Statuses[0].CurrentLimit; l.RequestsPerUnit != 0 || l.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE {
		t.Errorf("the ban's current_limit %v, want 0 per MINUTE", l)
	}
	// Any algorithm: never 0 for a limited descriptor.
	for _, a := range []string{"token_bucket", "gcra", "leaky_bucket", "sliding_window", "sliding_log"} {
		p := pol("p_"+a, 4, time.Minute, algorithm(sluice.Algorithm(a)))
		e := newEnv(t, openMemory, newConfig(domain("d", node("k", "", limits(p)))))
		for _, hits := range []uint64{0, 1} {
			st := e.call("d", 0, withHits(desc("k", "v"), hits)).Statuses[0]
			if d := st.DurationUntilReset.AsDuration(); d <= 0 || d > 2*time.Minute {
				t.Errorf("%s, %d hits: duration_until_reset %v", a, hits, d)
			}
		}
	}
}

// TestShareThresholdCounts: every value a share_threshold glob matches draws
// on one counter; an exact value beside it keeps its own.
func TestShareThresholdCounts(t *testing.T) {
	e := newEnv(t, openMemory, loadRatelimit(t, "share.yaml"))
	const d = "shapes-share"
	checkStatuses(t, e.call(d, 0, desc("files", "files/a.pdf")), codeOK, ok(anonymous, 2))
	checkStatuses(t, e.call(d, 0, desc("files", "files/b.csv")), codeOK, ok(anonymous, 1))
	checkStatuses(t, e.call(d, 0, desc("files", "files/c.txt")), codeOK, ok(anonymous, 0))
	checkStatuses(t, e.call(d, 0, desc("files", "files/d")), codeOverLimit, over(anonymous, 0))
	// A shared level above a limit: users share, actions do not.
	checkStatuses(t, e.call(d, 0, desc("user", "user/1", "action", "read"), desc("user", "user/2", "action", "read")), codeOK, ok(anonymous, 3), ok(anonymous, 3))
	checkStatuses(t, e.call(d, 0, desc("user", "user/3", "action", "write")), codeOK, ok(anonymous, 4))
	// Exact beside a shared glob; share_threshold: false counts per value.
	checkStatuses(t, e.call(d, 0, desc("file", "test1"), desc("file", "test2"), desc("file", "test3")), codeOK, ok(anonymous, 0), ok(anonymous, 4), ok(anonymous, 4))
	checkStatuses(t, e.call(d, 0, desc("mixed", "m/1"), desc("mixed", "m/2")), codeOK, ok(anonymous, 1), ok(anonymous, 1))
	checkStatuses(t, e.call(d, 0, desc("route", "/api/a/v1"), desc("route", "/api/b/v1")), codeOK, ok(anonymous, 0), ok(anonymous, 0))
}

// TestQuotaMode: a quota-mode limit is counted but does not deny by itself:
// over it, its descriptor is OVER_LIMIT and the request OK; with every
// quota-mode limit of the request exhausted, the request is denied. As
// envoyproxy/ratelimit now, no quotaModeEnabled / quotaModeViolations
// metadata is sent.
func TestQuotaMode(t *testing.T) {
	e := newEnv(t, openMemory, loadRatelimit(t, "quota.yaml"))
	const d = "shapes-quota"
	primary, secondary := desc("backend", "primary"), desc("backend", "secondary")
	checkStatuses(t, e.call(d, 0, primary, secondary), codeOK, ok(anonymous, 0), ok(anonymous, 1))
	resp := e.call(d, 0, primary, secondary)
	checkStatuses(t, resp, codeOK, over(anonymous, 0), ok(anonymous, 0))
	if md := resp.GetDynamicMetadata(); md != nil {
		t.Fatalf("dynamic metadata %v without WithDynamicMetadata", md)
	}
	checkStatuses(t, e.call(d, 0, primary, secondary), codeOverLimit, over(anonymous, 0), over(anonymous, 0))
}

// TestReplacesScript replays envoyproxy/ratelimit's replaces integration
// script: Envoy's routes send (foo, bar), plus (source_cluster,
// destination_cluster), plus (category); the answers are its expectations.
// A replaced limit is not charged, so it still has its quota afterwards.
func TestReplacesScript(t *testing.T) {
	e := newEnv(t, openMemory, loadRatelimit(t, "replaces.yaml"))
	type step struct {
		foo, bar, dest, category string
		ok                       bool
	}
	for i, s := range []step{
		// The ban alone, and with a cluster that does not replace it.
		{"bkthomps", "banned", "", "", false},
		{"bkthomps", "banned", "mock", "", false},
		// Replaced: the override's 2 per minute decides.
		{"bkthomps", "banned", "override", "", true},
		{"bkthomps", "banned", "override", "", true},
		{"bkthomps", "banned", "override", "", false},
		// Replacing leaves the replaced limit's own quota alone.
		{"my_foo", "bkthomps", "bkthomps", "", true},
		{"my_foo", "bkthomps", "bkthomps", "", true},
		{"my_foo", "bkthomps", "bkthomps", "", false},
		{"my_foo", "bkthomps", "not_bkthomps", "", true},
		{"my_foo", "bkthomps", "not_bkthomps", "", false},
		{"my_foo", "bkthomps", "bkthomps", "", false},
		// One limit replacing two.
		{"my_foo", "bkthomps", "fake", "account", true},
		{"my_foo", "bkthomps", "fake", "account", true},
		{"my_foo", "bkthomps", "fake", "account", true},
		{"my_foo", "bkthomps", "fake", "account", true},
		{"my_foo", "bkthomps", "fake", "account", false},
		{"foo_2", "bkthomps", "", "", true},
		{"foo_2", "bkthomps", "", "", false},
		{"foo_3", "bar_3", "fake", "", true},
		{"foo_3", "bar_3", "fake", "", true},
		{"foo_3", "bar_3", "fake", "", false},
		{"my_foo", "bkthomps", "fake", "account", false},
	} {
		ds := descs(desc("foo", s.foo, "bar", s.bar))
		if s.dest != "" {
			ds = append(ds, desc("source_cluster", "proxy", "destination_cluster", s.dest))
		}
		if s.category != "" {
			ds = append(ds, desc("category", s.category))
		}
		if got := e.call("shapes-replaces", 0, ds...).OverallCode == codeOK; got != s.ok {
			t.Fatalf("step %d %+v: allowed %v, want %v", i, s, got, s.ok)
		}
	}
}

// TestQuotaModeWithEnforcedLimits: with every quota gone, a request is
// denied without charging its enforced limits, which report their state.
func TestQuotaModeWithEnforcedLimits(t *testing.T) {
	quota := pol("q", 1, time.Minute, func(p *config.Policy) { p.QuotaMode, p.Shadow = true, true })
	e := newEnv(t, openMemory, newConfig(domain("d",
		node("backend", "", limits(quota)),
		node("user", "", limits(pol("u", 2, time.Minute))))))
	checkStatuses(t, e.call("d", 0, desc("backend", "b"), desc("user", "x")), codeOK, ok("q", 0), ok("u", 1))
	for range 2 {
		checkStatuses(t, e.call("d", 0, desc("backend", "b"), desc("user", "x")), codeOverLimit, over("q", 0), ok("u", 1))
	}
}

// TestQuotaGoneAfterCharging: a request that found quota when it looked but
// none once decided (another took the last unit meanwhile) is denied, and its
// enforced limits, charged, are reported as they stand, not as exhausted.
func TestQuotaGoneAfterCharging(t *testing.T) {
	e := newEnv(t, openMemory, newConfig(domain("d")))
	q := pol("q", 1, time.Minute, func(p *config.Policy) { p.QuotaMode, p.Shadow = true, true })
	u := pol("u", 2, time.Minute)
	sc := getScratch()
	defer putScratch(sc)
	sc.limits = append(sc.limits, limitRef{policy: q, key: "b", cost: 1, desc: 0}, limitRef{policy: u, key: "x", cost: 1, desc: 1})
	sc.plan()
	// What the engine decides when another request takes q's last unit
	// between its peek and its charge (package decide's TestQuotaRace).
	sc.checks[0].Flags = decide.Shadow | decide.Quota | decide.Exhausted
	sc.results[0] = sluice.Result{Allowed: false, Limit: 1, Remaining: 0, RetryAfter: time.Second}
	sc.results[1] = sluice.Result{Allowed: true, Limit: 2, Remaining: 0}
	sc.req.Allowed, sc.req.QuotaDenied = false, true
	checkStatuses(t, e.srv.respond(sc, 2), codeOverLimit, over("q", 0), ok("u", 0))
}

// TestGlobLimits: a * inside a value limits what it matches, over RLS
// (ratelimit's midWild: bar*b limits barb), each value on its own counter.
func TestGlobLimits(t *testing.T) {
	e := newEnv(t, openMemory, loadRatelimit(t, "wildcard.yaml"))
	const d = "shapes-wildcard"
	for i := range 20 {
		checkStatuses(t, e.call(d, 0, desc("inner", "abz")), codeOK, ok(anonymous, uint32(19-i)))
	}
	checkStatuses(t, e.call(d, 0, desc("inner", "abz")), codeOverLimit, over(anonymous, 0))
	checkStatuses(t, e.call(d, 0, desc("inner", "ab-z"), desc("many", "x-v1-rpc"), desc("inner", "abz-")), codeOK,
		ok(anonymous, 19), ok(anonymous, 19), noLimit)
}
