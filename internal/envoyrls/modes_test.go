package envoyrls

import (
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/storetest"
)

// modesConfig is a domain with an enforced limit per user and one per
// backend in quota mode, both of 1 a minute.
func modesConfig() *config.Config {
	quota := pol("q", 1, time.Minute, func(p *config.Policy) { p.QuotaMode, p.Shadow = true, true })
	return newConfig(domain("d",
		node("user", "", limits(pol("u", 1, time.Minute))),
		node("backend", "", limits(quota))))
}

func withModes(m config.Modes) func(*storetest.Clock) []service.Option {
	return func(*storetest.Clock) []service.Option { return []service.Option{service.WithModes(m)} }
}

// TestShadowModeDomain: with SHADOW_MODE every request to a domain is OK,
// while its statuses say what would have denied it (a quota-mode limit with
// no quota left is OVER_LIMIT) and every limit is still counted; a request
// too large to decide is OK too. Without it the same requests are denied.
func TestShadowModeDomain(t *testing.T) {
	for _, shadow := range []bool{false, true} {
		e := newEnvService(t, openMemory, modesConfig(), withModes(config.Modes{Shadow: shadow}))
		denied := codeOverLimit
		if shadow {
			denied = codeOK
		}
		user, backend := desc("user", "alice"), desc("backend", "b")
		checkStatuses(t, e.call("d", 0, user, backend), codeOK, ok("u", 0), ok("q", 0))
		if shadow {
			// The enforced limit is a shadow one: OK, nothing left; the
			// quota has none left either, which denies but for the shadow.
			checkStatuses(t, e.call("d", 0, user, backend), codeOK, ok("u", 0), over("q", 0))
		} else {
			checkStatuses(t, e.call("d", 0, user, backend), codeOverLimit, over("u", 0), over("q", 0))
		}
		// Counted all along: the user's limit has nothing left.
		checkStatuses(t, e.call("d", 0, user), denied, want{code: denied, limit: "u"})
		many := make([]*ratelimitv3.RateLimitDescriptor, DefaultMaxDescriptors+1)
		for i := range many {
			many[i] = desc("user", "bob")
		}
		if resp := e.call("d", 0, many...); resp.OverallCode != denied {
			t.Fatalf("shadow %v: %d descriptors: %v, want %v", shadow, len(many), resp.OverallCode, denied)
		}
		if got := e.svc.Config().Domains["d"].Shadow; got != shadow {
			t.Fatalf("the domain in force: shadow %v, want %v", got, shadow)
		}
	}
}

// TestQuotaModeDomain: with QUOTA_MODE every limit of a domain is a quota,
// so a request is denied only when all of its limits are exhausted; without
// it, one exhausted limit denies.
func TestQuotaModeDomain(t *testing.T) {
	for _, quota := range []bool{false, true} {
		e := newEnvService(t, openMemory, modesConfig(), withModes(config.Modes{Quota: quota}))
		checkStatuses(t, e.call("d", 0, desc("user", "alice"), desc("backend", "b")), codeOK, ok("u", 0), ok("q", 0))
		// The user's limit is exhausted, another backend has quota.
		resp := e.call("d", 0, desc("user", "alice"), desc("backend", "c"))
		if quota {
			checkStatuses(t, resp, codeOK, over("u", 0), ok("q", 0))
		} else {
			checkStatuses(t, resp, codeOverLimit, over("u", 0), ok("q", 1))
		}
		// Both exhausted: denied either way.
		checkStatuses(t, e.call("d", 0, desc("user", "alice"), desc("backend", "b")), codeOverLimit, over("u", 0), over("q", 0))
	}
}
