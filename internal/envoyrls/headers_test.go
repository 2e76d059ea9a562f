package envoyrls

import (
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// member is one list member of a RateLimit-Policy or RateLimit field.
type member struct {
	name   string
	params map[string]int64
}

// parseField parses the Structured Field lists FormatPolicy and
// FormatRateLimit write: `"name";a=1;b=2, "other";a=3`.
func parseField(t *testing.T, field string) []member {
	t.Helper()
	var ms []member
	for _, item := range strings.Split(field, ", ") {
		parts := strings.Split(item, ";")
		name, err := strconv.Unquote(parts[0])
		if err != nil {
			t.Fatalf("member %q of %q: name: %v", item, field, err)
		}
		m := member{name: name, params: map[string]int64{}}
		for _, p := range parts[1:] {
			k, v, found := strings.Cut(p, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			if !found || err != nil {
				t.Fatalf("member %q of %q: parameter %q", item, field, p)
			}
			m.params[k] = n
		}
		ms = append(ms, m)
	}
	return ms
}

// headerMap returns the response's headers to add, failing on a repeat.
func headerMap(t *testing.T, resp *rlsv3.RateLimitResponse) map[string]string {
	t.Helper()
	h := map[string]string{}
	for _, hv := range resp.ResponseHeadersToAdd {
		if _, dup := h[hv.Key]; dup {
			t.Fatalf("header %s twice", hv.Key)
		}
		h[hv.Key] = hv.Value
	}
	return h
}

// checkMembers compares a field with the expected members, in order.
func checkMembers(t *testing.T, field string, want ...member) {
	t.Helper()
	got := parseField(t, field)
	if len(got) != len(want) {
		t.Fatalf("field %q has %d members, want %d", field, len(got), len(want))
	}
	for i, w := range want {
		if got[i].name != w.name || len(got[i].params) != len(w.params) {
			t.Fatalf("field %q member %d: %+v, want %+v", field, i, got[i], w)
		}
		for k, v := range w.params {
			if got[i].params[k] != v {
				t.Fatalf("field %q member %d: %s=%d, want %d", field, i, k, got[i].params[k], v)
			}
		}
	}
}

func policyMember(name string, q, w int64) member {
	return member{name, map[string]int64{"q": q, "w": w}}
}

func rateMember(name string, r, t int64) member {
	return member{name, map[string]int64{"r": r, "t": t}}
}

func TestHeaders(t *testing.T) {
	cfg := newConfig(domain("api",
		node("user", "", limits(pol("per_user", 3, time.Minute))),
		node("ip", "", limits(pol("per_ip", 10, 10*time.Second))),
		node("watch", "", limits(pol("watching", 1, time.Minute, shadow)))))
	e := newEnv(t, openMemory, cfg, WithHeaders(true))

	// Allowed: both enforced limits, not the shadow one; no Retry-After.
	h := headerMap(t, e.call("api", 0, desc("user", "a"), desc("ip", "x"), desc("watch", "w")))
	checkMembers(t, h["RateLimit-Policy"], policyMember("per_user", 3, 60), policyMember("per_ip", 10, 10))
	checkMembers(t, h["RateLimit"], rateMember("per_user", 2, 45), rateMember("per_ip", 9, 5))
	if _, found := h["Retry-After"]; found || len(h) != 2 {
		t.Fatalf("headers %v, want RateLimit-Policy and RateLimit only", h)
	}

	// One limit reported by two descriptors is listed once.
	h = headerMap(t, e.call("api", 0, desc("user", "a"), desc("user", "a")))
	checkMembers(t, h["RateLimit"], rateMember("per_user", 0, 45))

	// Denied: Retry-After is the wait until the request passes, rounded up.
	e.clock.Advance(500 * time.Millisecond)
	resp := e.call("api", 0, desc("user", "a"), desc("ip", "x"))
	checkStatuses(t, resp, codeOverLimit, over("per_user", 0), ok("per_ip", 9))
	h = headerMap(t, resp)
	checkMembers(t, h["RateLimit"], rateMember("per_user", 0, 45), rateMember("per_ip", 9, 5))
	if h["Retry-After"] != "45" {
		t.Fatalf("Retry-After %q, want 45 (44.5s rounded up)", h["Retry-After"])
	}

	// A cost over capacity: waiting does not help, so no Retry-After.
	h = headerMap(t, e.call("api", 0, withHits(desc("ip", "y"), 11)))
	checkMembers(t, h["RateLimit"], rateMember("per_ip", 10, 0))
	if _, found := h["Retry-After"]; found {
		t.Fatalf("Retry-After %q for a cost over capacity", h["Retry-After"])
	}

	// Nothing to report, nothing added.
	if resp := e.call("api", 0, desc("watch", "w"), desc("nope", "x")); resp.ResponseHeadersToAdd != nil {
		t.Fatalf("headers %v with no enforced limit", resp.ResponseHeadersToAdd)
	}
}

func TestHeadersOffByDefault(t *testing.T) {
	e := newEnv(t, openMemory, newConfig(domain("api", node("user", "", limits(pol("per_user", 1, time.Minute))))))
	for range 2 {
		if resp := e.call("api", 0, desc("user", "a")); len(resp.ResponseHeadersToAdd) != 0 {
			t.Fatalf("headers %v without WithHeaders", resp.ResponseHeadersToAdd)
		}
	}
}

// TestLimitHeaders: envoyproxy/ratelimit's three headers describe the first
// descriptor with the least remaining (its tests' vectors: limit, remaining,
// whole seconds to reset), under configurable names, beside the IETF fields
// or alone; none when no descriptor has a limit.
func TestLimitHeaders(t *testing.T) {
	cfg := newConfig(domain("d",
		node("a", "", limits(pol("a", 10, time.Minute))),
		node("b", "", limits(pol("b", 3, time.Hour))),
		node("free", "", nil)))
	e := newEnv(t, openMemory, cfg, WithLimitHeaders(DefaultLimitHeaderNames))
	// 15s into the minute and the hour.
	h := headerMap(t, e.call("d", 0, desc("a", "x"), desc("b", "y")))
	want := map[string]string{"RateLimit-Limit": "3", "RateLimit-Remaining": "2", "RateLimit-Reset": "3585"}
	if !maps.Equal(h, want) {
		t.Fatalf("headers %v, want %v", h, want)
	}
	// An over-limit descriptor reports 0 remaining.
	e.call("d", 0, desc("b", "z"), desc("b", "z"))
	h = headerMap(t, e.call("d", 0, desc("a", "x"), withHits(desc("b", "z"), 2)))
	want = map[string]string{"RateLimit-Limit": "3", "RateLimit-Remaining": "0", "RateLimit-Reset": "3585"}
	if !maps.Equal(h, want) {
		t.Fatalf("headers %v, want %v", h, want)
	}
	if resp := e.call("d", 0, desc("free", "x")); len(resp.ResponseHeadersToAdd) != 0 {
		t.Fatalf("headers %v without a limit", resp.ResponseHeadersToAdd)
	}
	// Renamed, one left out, beside the IETF fields.
	names := LimitHeaderNames{Limit: "X-RateLimit-Limit", Reset: "X-RateLimit-Reset"}
	both := newEnv(t, openMemory, cfg, WithHeaders(true), WithLimitHeaders(names))
	h = headerMap(t, both.call("d", 0, desc("a", "x")))
	if h["X-RateLimit-Limit"] != "10" || h["X-RateLimit-Reset"] != "45" || h["RateLimit-Remaining"] != "" || h["RateLimit"] == "" {
		t.Fatalf("headers %v", h)
	}
}

// TestLimitHeadersMultipliedUnit: RateLimit-Reset of a window of several
// units (unit_multiplier) is the seconds to the end of that window, the one
// the decision is made in: 15s into 20 per 5 minutes it is 285, where
// envoyproxy/ratelimit, which ignores the multiplier there, says 45.
func TestLimitHeadersMultipliedUnit(t *testing.T) {
	e := newEnv(t, openMemory, newConfig(domain("d", node("a", "", limits(pol("a", 20, 5*time.Minute))))),
		WithLimitHeaders(DefaultLimitHeaderNames))
	if h := headerMap(t, e.call("d", 0, desc("a", "x"))); h["RateLimit-Reset"] != "285" || h["RateLimit-Remaining"] != "19" {
		t.Fatalf("headers %v, want RateLimit-Reset 285 and 19 remaining", h)
	}
}

func TestLimitHeadersFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	if names, on := LimitHeadersFromEnv(env(nil)); on || names != DefaultLimitHeaderNames {
		t.Fatalf("no variables: %v, %v", names, on)
	}
	names, on := LimitHeadersFromEnv(env(map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "true", "LIMIT_REMAINING_HEADER": "X-Left"}))
	if !on || names != (LimitHeaderNames{Limit: "RateLimit-Limit", Remaining: "X-Left", Reset: "RateLimit-Reset"}) {
		t.Fatalf("got %v, %v", names, on)
	}
}
