package proxy

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// plans: api takes the plan from X-Plan (its plans.from.header); the /tier/
// route reads other's plan from X-Tier, the header its limit names.
var plans = y(
	"policies:",
	"  - name: api",
	"    algorithm: fixed_window",
	"    limit: 1",
	"    period: 1m",
	"    plans:",
	"      from: {header: x-plan}",
	"      default: free",
	"      limits: {free: {limit: 2}, pro: {limit: 5}}",
	"  - name: other",
	"    algorithm: fixed_window",
	"    limit: 1",
	"    period: 1m",
	"    plans: {limits: {gold: {limit: 3}}}",
	"proxy:",
	"  routes:",
	"    - match: {path_prefix: /tier/}",
	"      limits: [{policy: other, key: 'header:X-Tenant', plan_header: x-tier}]",
	"    - limits: [{policy: api, key: 'header:X-Tenant'}]",
)

// admitted sends GETs until one is denied (at most 20) and returns how many
// passed and the RateLimit-Policy of the first.
func admitted(t *testing.T, p *testProxy, path string, kv ...string) (int, string) {
	t.Helper()
	policy := ""
	for n := range 20 {
		resp := p.get(t, path, kv...)
		if n == 0 {
			policy = resp.Header.Get("RateLimit-Policy")
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			return n, policy
		}
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	t.Fatalf("%v: never denied", kv)
	return 0, ""
}

// TestPlanHeader: the plan header picks the plan's limit, advertised in
// RateLimit-Policy; no header, an unknown plan or an oversized one get the
// default plan (or the policy's own limit), never more; every plan of a key
// spends one counter.
func TestPlanHeader(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, plans, up.URL)
	for _, c := range []struct {
		path   string
		kv     []string
		n      int
		policy string
	}{
		{"/", []string{"X-Tenant", "a", "X-Plan", "pro"}, 5, `"api";q=5;w=60`},
		{"/", []string{"X-Tenant", "b"}, 2, `"api";q=2;w=60`},
		{"/", []string{"X-Tenant", "c", "X-Plan", "gold"}, 2, `"api";q=2;w=60`},
		{"/", []string{"X-Tenant", "d", "X-Plan", strings.Repeat("p", 4000)}, 2, `"api";q=2;w=60`},
		{"/", []string{"X-Tenant", "e", "X-Tier", "pro"}, 2, `"api";q=2;w=60`}, // not api's header
		{"/tier/", []string{"X-Tenant", "a", "X-Tier", "gold"}, 3, `"other";q=3;w=60`},
		{"/tier/", []string{"X-Tenant", "b", "X-Plan", "gold"}, 1, `"other";q=1;w=60`}, // no default: the policy's own
	} {
		if n, policy := admitted(t, p, c.path, c.kv...); n != c.n || policy != c.policy {
			t.Errorf("%s %v: admitted %d under %q, want %d under %q", c.path, c.kv, n, policy, c.n, c.policy)
		}
	}
	// One counter per key whatever the plan: pro spent 2, free has none left.
	got := p.statuses(t, 2, "/", "X-Tenant", "f", "X-Plan", "pro")
	got = append(got, p.get(t, "/", "X-Tenant", "f").StatusCode, p.get(t, "/", "X-Tenant", "f", "X-Plan", "pro").StatusCode)
	if want := []int{201, 201, 429, 201}; !slices.Equal(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
}
