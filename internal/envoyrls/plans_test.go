package envoyrls

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/overrides"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/storetest"
)

// plansYAML limits each tenant by its plan, named by the descriptor's last
// entry "plan"; one tenant's plans share its counter.
const plansYAML = `domain: saas
descriptors:
  - key: tenant
    rate_limit:
      name: per_tenant
      unit: minute
      requests_per_unit: 2
      plans:
        from: {descriptor_key: plan}
        default: free
        limits:
          free: {limit: 3}
          pro: {limit: 10}
          hourly: {limit: 100, period: 1h}
`

func loadYAML(t *testing.T, body string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ratelimit.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// rate is what a status's current_limit says.
type rate struct {
	unit rlsv3.RateLimitResponse_RateLimit_Unit
	rpu  uint32
}

func rateOfStatus(st *rlsv3.RateLimitResponse_DescriptorStatus) rate {
	return rate{st.GetCurrentLimit().GetUnit(), st.GetCurrentLimit().GetRequestsPerUnit()}
}

var (
	perMinute = func(n uint32) rate { return rate{rlsv3.RateLimitResponse_RateLimit_MINUTE, n} }
	perHour   = func(n uint32) rate { return rate{rlsv3.RateLimitResponse_RateLimit_HOUR, n} }
)

// TestPlansFromDescriptor: the plan entry picks the limit, reported in
// current_limit and the limit headers, and is no part of the key: every plan
// of a tenant spends one counter. No plan entry, an unknown plan or an
// oversized one get the default plan, never more.
func TestPlansFromDescriptor(t *testing.T) {
	for name, open := range map[string]opener{"memory": openMemory, "redis": redisOpener(t)} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, open, loadYAML(t, plansYAML), WithHeaders(true), WithLimitHeaders(DefaultLimitHeaderNames))
			steps := []struct {
				entries []string
				want    want
				rate    rate
			}{
				{[]string{"tenant", "acme", "plan", "pro"}, ok("per_tenant", 9), perMinute(10)},
				{[]string{"tenant", "acme", "plan", "free"}, ok("per_tenant", 1), perMinute(3)}, // the same counter
				{[]string{"tenant", "acme"}, ok("per_tenant", 0), perMinute(3)},                 // no plan: the default
				{[]string{"tenant", "acme", "plan", "gold"}, over("per_tenant", 0), perMinute(3)},
				{[]string{"tenant", "acme", "plan", strings.Repeat("p", 5000)}, over("per_tenant", 0), perMinute(3)},
				{[]string{"tenant", "acme", "plan", "pro"}, ok("per_tenant", 6), perMinute(10)},
				{[]string{"tenant", "beta", "plan", "hourly"}, ok("per_tenant", 99), perHour(100)},
			}
			for i, s := range steps {
				resp := e.call("saas", 0, desc(s.entries...))
				checkStatuses(t, resp, s.want.code, s.want)
				if got := rateOfStatus(resp.Statuses[0]); got != s.rate {
					t.Fatalf("step %d: current_limit %v, want %v", i, got, s.rate)
				}
				h := headerMap(t, resp)
				if lim := h["RateLimit-Limit"]; lim != strconv.FormatUint(uint64(s.rate.rpu), 10) {
					t.Fatalf("step %d: RateLimit-Limit %q, want %d", i, lim, s.rate.rpu)
				}
				if m := parseField(t, h["RateLimit-Policy"]); len(m) != 1 || m[0].params["q"] != int64(s.rate.rpu) {
					t.Fatalf("step %d: RateLimit-Policy %q, want q=%d", i, h["RateLimit-Policy"], s.rate.rpu)
				}
			}
			// The plan names its limit only last: first, it is an entry the
			// tree does not have, and the descriptor matches nothing.
			checkStatuses(t, e.call("saas", 0, desc("plan", "pro", "tenant", "acme")), codeOK, noLimit)
		})
	}
}

// TestPlanCapacity: a cost is judged by the plan's capacity: above the
// default's but within pro's is admitted, above pro's denied.
func TestPlanCapacity(t *testing.T) {
	e := newEnv(t, openMemory, loadYAML(t, plansYAML))
	checkStatuses(t, e.call("saas", 8, desc("tenant", "acme", "plan", "pro")), codeOK, ok("per_tenant", 2))
	checkStatuses(t, e.call("saas", 11, desc("tenant", "big", "plan", "pro")), codeOverLimit, over("per_tenant", 0))
	checkStatuses(t, e.call("saas", 4, desc("tenant", "big")), codeOverLimit, over("per_tenant", 0))
}

// TestCurrentLimitUnderOverride: a runtime override of a descriptor limit's
// key is what current_limit, the limit headers and RateLimit-Policy report,
// and what a cost is judged by.
func TestCurrentLimitUnderOverride(t *testing.T) {
	cfg := newConfig(domain("d", node("user", "", limits(pol("u", 2, time.Minute)))))
	for name, open := range map[string]opener{"memory": openMemory, "redis": redisOpener(t)} {
		t.Run(name, func(t *testing.T) {
			var ov *overrides.Store
			e := newEnvService(t, open, cfg, func(c *storetest.Clock) []service.Option {
				ov = overrides.NewMemory(overrides.WithClock(c), overrides.WithLogger(slog.New(slog.DiscardHandler)))
				return []service.Option{service.WithOverrides(ov)}
			}, WithHeaders(true), WithLimitHeaders(DefaultLimitHeaderNames))
			ctx := context.Background()
			p := cfg.Policy("u").Policy
			for _, o := range []overrides.Override{{Key: "vip", Limit: 5, Period: time.Hour}, {Key: "low", Limit: 1, Period: time.Minute}} {
				if _, err := ov.Put(ctx, p, o); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []struct {
				key  string
				hits uint32
				want want
				rate rate
			}{
				{"vip", 1, ok("u", 4), perHour(5)},
				{"vip", 4, ok("u", 0), perHour(5)}, // above the configured 2, within the override
				{"plain", 1, ok("u", 1), perMinute(2)},
				{"low", 2, over("u", 0), perMinute(1)}, // within the configured 2, above the override
			} {
				resp := e.call("d", c.hits, desc("user", c.key))
				checkStatuses(t, resp, c.want.code, c.want)
				if got := rateOfStatus(resp.Statuses[0]); got != c.rate {
					t.Fatalf("%s: current_limit %v, want %v", c.key, got, c.rate)
				}
				h := headerMap(t, resp)
				if h["RateLimit-Limit"] != strconv.FormatUint(uint64(c.rate.rpu), 10) {
					t.Fatalf("%s: RateLimit-Limit %q, want %d", c.key, h["RateLimit-Limit"], c.rate.rpu)
				}
				if m := parseField(t, h["RateLimit-Policy"]); len(m) != 1 || m[0].params["q"] != int64(c.rate.rpu) {
					t.Fatalf("%s: RateLimit-Policy %q, want q=%d", c.key, h["RateLimit-Policy"], c.rate.rpu)
				}
			}
		})
	}
}
