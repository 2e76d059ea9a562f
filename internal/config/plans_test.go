package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPlans(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writePlans(t, path, `policies:
  - name: api
    algorithm: gcra
    limit: 10
    period: 1m
    plans:
      from: {header: x-plan}
      default: free
      limits:
        free: {limit: 100}
        pro: {limit: 1000, period: 1s, burst: 50}
`)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Policy("api")
	if p.Plans.From != (PlanSource{Header: "X-Plan"}) {
		t.Errorf("From %+v, want the canonical header X-Plan", p.Plans.From)
	}
	for plan, want := range map[string][3]int64{
		"pro":  {1000, int64(time.Second), 50},
		"free": {100, int64(time.Minute), 0},
		"":     {100, int64(time.Minute), 0}, // the default
		"gold": {100, int64(time.Minute), 0}, // unknown: the default
	} {
		sp := p.ForPlan(plan)
		if got := [3]int64{sp.Limit, int64(sp.Period), sp.Burst}; got != want || sp.Name != "api" || sp.Algorithm != p.Algorithm {
			t.Errorf("ForPlan(%q) = %+v, want %v", plan, sp, want)
		}
	}
	noDefault := *p
	noDefault.Plans = &Plans{Limits: p.Plans.Limits}
	if sp := noDefault.ForPlan("gold"); sp.Limit != 10 {
		t.Errorf("an unknown plan without a default: limit %d, want the policy's 10", sp.Limit)
	}
}

func TestPlansInvalid(t *testing.T) {
	for body, want := range map[string]string{
		"default: gold\n      limits:\n        free: {limit: 1}":                       `names no plan of limits: "gold"`,
		"limits:\n        free: {limit: 0}":                                            "limits.free.limit: must be at least 1",
		"limits:\n        free: {limit: 5, burst: 2}":                                  "burst",
		"limits:\n        free: {limit: 5, perod: 1s}":                                 "did you mean period?",
		"limits:\n        free: {limit: 5}\n        free: {limit: 6}":                  "duplicate plan",
		"limits:\n        'a b': {limit: 5}":                                           "may hold only letters",
		"default: free":                                                                "limits: required field is missing",
		"limits: [free]":                                                               "must be a mapping of plan names",
		"from: {descriptor_key: plan}\n      limits:\n        free: {limit: 5}":        "not native policies",
		"from: {header: X-Plan, query: plan}\n      limits:\n        free: {limit: 5}": "unknown field",
	} {
		path := filepath.Join(t.TempDir(), "sluice.yaml")
		writePlans(t, path, "policies:\n  - name: api\n    algorithm: fixed_window\n    limit: 10\n    period: 1m\n    plans:\n      "+body+"\n")
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", body, err, want)
		}
	}
}

func writePlans(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPlansEnvoy: a rate_limit's plans, with the descriptor entry that
// names the plan, set the node's PlanKey; a descriptor ending in that entry
// matches the node's limits and names its plan.
func TestPlansEnvoy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ratelimit.yaml")
	writePlans(t, path, `domain: saas
descriptors:
  - key: tenant
    rate_limits:
      - unit: minute
        requests_per_unit: 2
        plans:
          from: {descriptor_key: plan, header: x-plan}
          default: free
          limits:
            free: {limit: 3}
            pro: {limit: 10, period: 1h}
      - unit: hour
        requests_per_unit: 100
    descriptors:
      - key: path
        rate_limit: {unit: second, requests_per_unit: 1}
`)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	node := cfg.Domains["saas"].Descriptors[0]
	if node.PlanKey != "plan" {
		t.Fatalf("PlanKey %q, want plan", node.PlanKey)
	}
	p := node.Limits[0]
	if p.Plans.From != (PlanSource{DescriptorKey: "plan", Header: "X-Plan"}) {
		t.Errorf("From %+v", p.Plans.From)
	}
	if sp := p.ForPlan("pro"); sp.Limit != 10 || sp.Period != time.Hour || sp.Algorithm != p.Algorithm {
		t.Errorf("pro: %+v", sp)
	}
	for _, c := range []struct {
		entries   []Entry
		limits    int
		plan      string
		planEntry bool
	}{
		{[]Entry{{"tenant", "acme"}, {"plan", "pro"}}, 2, "pro", true},
		{[]Entry{{"tenant", "acme"}}, 2, "", false},
		{[]Entry{{"tenant", "acme"}, {"path", "/x"}}, 1, "", false},
		{[]Entry{{"plan", "pro"}, {"tenant", "acme"}}, 0, "", false},                   // the plan comes last
		{[]Entry{{"tenant", "acme"}, {"plan", "pro"}, {"plan", "free"}}, 0, "", false}, // once
		{[]Entry{{"tenant", "acme"}, {"path", "/x"}, {"plan", "pro"}}, 0, "", false},   // the path node has no plans
	} {
		m := cfg.Match("saas", c.entries)
		if len(m.Limits) != c.limits || m.Plan != c.plan || m.PlanEntry != c.planEntry {
			t.Errorf("Match(%v) = %d limits, plan %q (%v); want %d, %q (%v)", c.entries, len(m.Limits), m.Plan, m.PlanEntry, c.limits, c.plan, c.planEntry)
		}
	}
}

func TestPlansEnvoyInvalid(t *testing.T) {
	plans := "plans: {from: {descriptor_key: plan}, limits: {free: {limit: 5}}}"
	for body, want := range map[string]string{
		"rate_limit: {unit: minute, requests_per_unit: 0, " + plans + "}":                                                                                                                       "a ban has no plans",
		"rate_limit: {unlimited: true, " + plans + "}":                                                                                                                                          "not allowed with unlimited",
		"rate_limit: {unit: minute, requests_per_unit: 2, plans: {from: {}}}":                                                                                                                   "names no source",
		"rate_limit: {unit: minute, requests_per_unit: 2, plans: {from: {descriptor_key: ''}, limits: {a: {limit: 1}}}}":                                                                        "must not be empty",
		"rate_limit: {unit: minute, requests_per_unit: 2, plans: {from: {header: 'a b'}, limits: {a: {limit: 1}}}}":                                                                             "not a valid header name",
		"rate_limit: {unit: minute, requests_per_unit: 2, " + plans + "}\n    descriptors:\n      - {key: plan, rate_limit: {unit: second, requests_per_unit: 1}}":                              `a child descriptor has key "plan"`,
		"rate_limits:\n      - {unit: minute, requests_per_unit: 2, " + plans + "}\n      - {unit: hour, requests_per_unit: 9, plans: {from: {descriptor_key: tier}, limits: {a: {limit: 1}}}}": `one descriptor_key, got "plan" and "tier"`,
	} {
		path := filepath.Join(t.TempDir(), "ratelimit.yaml")
		writePlans(t, path, "domain: d\ndescriptors:\n  - key: tenant\n    "+body+"\n")
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", body, err, want)
		}
	}
}

// TestPlanHeader: a route limit's plan_header is read in canonical form,
// wins over the policy's from.header, and needs a policy with plans.
func TestPlanHeader(t *testing.T) {
	const policies = `policies:
  - {name: api, algorithm: fixed_window, limit: 1, period: 1m, plans: {from: {header: x-plan}, limits: {pro: {limit: 5}}}}
  - {name: flat, algorithm: fixed_window, limit: 1, period: 1m}
proxy:
  routes:
`
	cfg, err := Parse("t.yaml", []byte(policies+"    - limits: [{policy: api, key: ip}]\n    - limits: [{policy: api, key: ip, plan_header: x-tier}, {policy: flat, key: ip}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	api, flat := cfg.Policy("api"), cfg.Policy("flat")
	r0, r1 := cfg.Proxy.Routes[0].Limits[0], cfg.Proxy.Routes[1].Limits
	if h := r0.PlanHeaderOf(api); h != "X-Plan" {
		t.Errorf("the policy's header: %q", h)
	}
	if h := r1[0].PlanHeaderOf(api); h != "X-Tier" {
		t.Errorf("the route's header: %q", h)
	}
	if h := r1[1].PlanHeaderOf(flat); h != "" {
		t.Errorf("no plans: %q", h)
	}
	for route, want := range map[string]string{
		"    - limits: [{policy: flat, key: ip, plan_header: X-Plan}]\n":  `proxy.routes[0].limits[0].plan_header: policy "flat" has no plans`,
		"    - limits: [{policy: api, key: ip, plan_header: 'x plan'}]\n": "not a valid header name",
	} {
		if _, err := Parse("t.yaml", []byte(policies+route)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", route, err, want)
		}
	}
}
