package envoyrls

import (
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/config"
)

func matchingConfig() *config.Config {
	return newConfig(
		domain("d",
			node("k", "exact", limits(pol("exact", 10, time.Minute))),
			node("k", "pre*", limits(pol("wild", 10, time.Minute))),
			node("k", "", limits(pol("default", 10, time.Minute))),
			node("a", "1", nil,
				node("b", "", limits(pol("nested", 10, time.Minute)),
					node("c", "deep", limits(pol("deeper", 10, time.Minute))))),
			unlimited("free", ""),
			&config.Descriptor{Key: "free", Value: "but_not_this", Limits: limits(pol("unfree", 10, time.Minute))},
		),
		domain("other",
			node("k", "", limits(pol("other_default", 10, time.Minute)))),
	)
}

func TestMatching(t *testing.T) {
	e := newEnv(t, openMemory, matchingConfig())
	cases := []struct {
		name   string
		domain string
		d      *ratelimitv3.RateLimitDescriptor
		limit  string // "" for none
	}{
		{"exact", "d", desc("k", "exact"), "exact"},
		{"wildcard", "d", desc("k", "prefix-1"), "wild"},
		{"wildcard, empty rest", "d", desc("k", "pre"), "wild"},
		{"default", "d", desc("k", "anything"), "default"},
		{"empty value takes the default", "d", desc("k", ""), "default"},
		{"nested", "d", desc("a", "1", "b", "x"), "nested"},
		{"nested deeper", "d", desc("a", "1", "b", "x", "c", "deep"), "deeper"},
		{"partial: a node without limits", "d", desc("a", "1"), ""},
		{"longer than the tree", "d", desc("a", "1", "b", "x", "c", "other"), ""},
		{"no such value", "d", desc("a", "2", "b", "x"), ""},
		{"unknown key", "d", desc("zzz", "1"), ""},
		{"unlimited", "d", desc("free", "x"), "unlimited"},
		{"exact beats unlimited default", "d", desc("free", "but_not_this"), "unfree"},
		{"no entries", "d", desc(), ""},
		{"other domain", "other", desc("k", "exact"), "other_default"},
		{"unknown domain", "nope", desc("k", "exact"), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := e.call(c.domain, 0, c.d)
			switch c.limit {
			case "":
				checkStatuses(t, resp, codeOK, noLimit)
			case "unlimited":
				checkStatuses(t, resp, codeOK, unlimitedStatus)
			default:
				checkStatuses(t, resp, codeOK, ok(c.limit, 9))
			}
		})
	}
	// Every value under a default or wildcard has a counter of its own.
	checkStatuses(t, e.call("d", 0, desc("k", "v1")), codeOK, ok("default", 9))
	checkStatuses(t, e.call("d", 0, desc("k", "v1")), codeOK, ok("default", 8))
	checkStatuses(t, e.call("d", 0, desc("k", "v2")), codeOK, ok("default", 9))
	checkStatuses(t, e.call("d", 0, desc("k", "prefix-1")), codeOK, ok("wild", 8))
	checkStatuses(t, e.call("d", 0, desc("k", "prefix-2")), codeOK, ok("wild", 9))
}

// TestKeysDoNotCollide: value lists that would join to the same string are
// still different keys.
func TestKeysDoNotCollide(t *testing.T) {
	e := newEnv(t, openMemory, newConfig(domain("d",
		node("p", "", nil, node("q", "", limits(pol("pq", 10, time.Minute)))))))
	checkStatuses(t, e.call("d", 0, desc("p", "a|b", "q", "c")), codeOK, ok("pq", 9))
	checkStatuses(t, e.call("d", 0, desc("p", "a", "q", "b|c")), codeOK, ok("pq", 9))
	checkStatuses(t, e.call("d", 0, desc("p", `a\`, "q", "c")), codeOK, ok("pq", 9))
	checkStatuses(t, e.call("d", 0, desc("p", `a\`, "q", "c")), codeOK, ok("pq", 8))
	checkStatuses(t, e.call("d", 0, desc("p", `a`, "q", `\c`)), codeOK, ok("pq", 9))
}

// TestMatchingMixed: descriptors with and without limits in one request.
func TestMatchingMixed(t *testing.T) {
	e := newEnv(t, openMemory, matchingConfig())
	resp := e.call("d", 0, desc("free", "x"), desc("k", "exact"), desc("zzz", "1"), desc("a", "1", "b", "y"))
	checkStatuses(t, resp, codeOK, unlimitedStatus, ok("exact", 9), noLimit, ok("nested", 9))
}

// TestConfigReload: a reload applies from the next request; counters of a
// policy that keeps its name carry over.
func TestConfigReload(t *testing.T) {
	e := newEnv(t, openMemory, newConfig(domain("d", node("k", "", limits(pol("p", 10, time.Minute))))))
	checkStatuses(t, e.call("d", 0, desc("k", "v")), codeOK, ok("p", 9))
	err := e.svc.Reload(func() (*config.Config, error) {
		return newConfig(domain("d", node("k", "", limits(pol("p", 20, time.Minute))))), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkStatuses(t, e.call("d", 0, desc("k", "v")), codeOK, ok("p", 18))
}
