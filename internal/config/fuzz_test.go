package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FuzzParse checks that Parse never panics, that a failure is a well-formed
// *Error, and that a success holds only valid policies, each reachable from
// Policies under its own name. The committed corpus (testdata/fuzz/FuzzParse)
// holds the examples and files exercising most error paths.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		y("policies:", "  - {name: a, algorithm: gcra, limit: 10, period: 1m, burst: 5, shadow: true}"),
		y("store: {url: 'redis://h:6379', timeout: 10ms}"),
		y("store: {url: 'redis://h:6379', lease: {ttl: 20ms, max_lease: 5}}"),
		y("policies:", "  - {name: a, algorithm: gcra, limit: 10, period: 1m, plans: {default: free, limits: {free: {limit: 2}, pro: {limit: 9, period: 1s, burst: 3}}}}"),
		y("store: {url: 'redis://h:6379', lease: off}", "policies:",
			"  - {name: a, algorithm: token_bucket, limit: 10, period: 1s, lease: {ttl: 50ms, max_lease: 2}}",
			"  - {name: b, algorithm: fixed_window, limit: 10, period: 1s, lease: off}"),
		y("domain: d", "descriptors:", "  - key: k", "    value: 'v*'", "    rate_limit: {unit: second, requests_per_unit: 1}"),
		y("domain: d", "descriptors:", "  - key: k", "    rate_limits:", "      - {algorithm: token_bucket, period: 90s, requests_per_unit: 3, burst: 9}",
			"      - {unit: day, requests_per_unit: 100, name: daily, replaces: [{name: x}]}",
			"    descriptors: [{key: j, rate_limit: {unlimited: true}}]"),
		y("x: &x {unit: second, requests_per_unit: 1}"),
		y("domain: d", "descriptors: [{key: a, rate_limit: &l {unit: minute, requests_per_unit: 2}}, {key: b, rate_limit: *l}]"),
		y("policies: []", "---", "policies: []"),
		y("domain: d", "descriptors:", "  - {key: k, value: 'a*b*', share_threshold: true, quota_mode: true, metadata: {x: [1, {y: z}]},",
			"     rate_limit: {unit: minute, unit_multiplier: 7, requests_per_unit: 3}}"),
		y("domain: d", "descriptors:", "  - key: t",
			"    rate_limit: {unit: minute, requests_per_unit: 2, plans: {from: {descriptor_key: plan, header: x-plan}, default: a, limits: {a: {limit: 3}, b: {limit: 9, period: 1h}}}}",
			"    descriptors: [{key: u, rate_limit: {unit: second, requests_per_unit: 1}}]"),
		y("policies:", "  - {name: a, algorithm: gcra, limit: 10, period: 1m, plans: {from: {header: X-Plan}, limits: {pro: {limit: 20}}}}",
			"proxy:", "  routes: [{limits: [{policy: a, key: ip, plan_header: x-tier, charge_header: x-tokens-used}]}]"),
		"{]",
	} {
		f.Add([]byte(s))
	}
	examples, _ := filepath.Glob("../../examples/*.yaml")
	shapes, _ := filepath.Glob("testdata/ratelimit/*.yaml")
	examples = append(examples, shapes...)
	for _, path := range examples {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.yaml", data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || len(e.Problems) == 0 || cfg != nil {
				t.Fatalf("Parse = %v, %v; want nil and a non-empty *Error", cfg, err)
			}
			for _, p := range e.Problems {
				if p.File != "fuzz.yaml" || p.Message == "" || p.Line < 0 || p.Column < 0 {
					t.Fatalf("malformed problem %+v", p)
				}
			}
			_ = e.Error()
			return
		}
		if len(cfg.Files) != 1 || cfg.Files[0] != "fuzz.yaml" {
			t.Fatalf("Files = %v", cfg.Files)
		}
		for name, p := range cfg.Policies {
			if p == nil || p.Name != name {
				t.Fatalf("Policies[%q] = %+v", name, p)
			}
			check := p.Policy
			if p.DeniesAll() {
				check.Limit = 1 // a ban: every other field must still be valid
			}
			if err := check.Validate(); err != nil {
				t.Fatalf("policy %q: %v", name, err)
			}
			if p.Plans != nil {
				for plan := range p.Plans.Limits {
					if sp := p.ForPlan(plan); sp.Validate() != nil || sp.Name != p.Name {
						t.Fatalf("policy %q plan %q: %+v", name, plan, sp)
					}
				}
			}
			if l := p.Lease; l != nil && !l.Off && (l.TTL < 0 || l.TTL > LeaseSpan(&p.Policy) || l.MaxLease < 0) {
				t.Fatalf("policy %q: lease %+v outside its bounds", name, l)
			}
		}
		for name, d := range cfg.Domains {
			if d == nil || d.Name != name {
				t.Fatalf("Domains[%q] = %+v", name, d)
			}
			checkTree(t, cfg, name, d.Descriptors, nil)
		}
		if cfg.Proxy != nil {
			for _, r := range cfg.Proxy.Routes {
				for _, l := range r.Limits {
					if l.PlanHeader != "" && cfg.Policy(l.Policy).Plans == nil {
						t.Fatalf("route limit %+v names a plan header for a policy without plans", l)
					}
				}
			}
		}
	})
}

// checkTree checks that every limit under level is the policy of that name in
// cfg.Policies, and that matching the path to each node does not panic and
// yields only such policies.
func checkTree(t *testing.T, cfg *Config, domain string, level []*Descriptor, path []Entry) {
	for _, d := range level {
		if d.Unlimited && len(d.Limits) > 0 {
			t.Fatalf("descriptor %+v is unlimited and has limits", d)
		}
		for _, p := range d.Limits {
			if cfg.Policies[p.Name] != p {
				t.Fatalf("limit %q of descriptor %q is not Policies[%q]", p.Name, d.Key, p.Name)
			}
		}
		here := append(path[:len(path):len(path)], Entry{d.Key, d.Value})
		for _, p := range cfg.Match(domain, here).Limits {
			if cfg.Policies[p.Name] != p {
				t.Fatalf("Match(%v) returned %q, not in Policies", here, p.Name)
			}
		}
		for _, p := range d.Limits {
			if p.Plans != nil && p.Plans.From.DescriptorKey != "" && p.Plans.From.DescriptorKey != d.PlanKey {
				t.Fatalf("limit %q takes its plan from %q, its descriptor from %q", p.Name, p.Plans.From.DescriptorKey, d.PlanKey)
			}
		}
		if d.PlanKey != "" && slices.Equal(cfg.Match(domain, here).Limits, d.Limits) {
			// A path that reaches d reaches its limits with a plan entry after it.
			withPlan := append(here[:len(here):len(here)], Entry{d.PlanKey, "any"})
			if m := cfg.Match(domain, withPlan); !m.PlanEntry || m.Plan != "any" || len(m.Limits) != len(d.Limits) {
				t.Fatalf("Match(%v) = %+v, want d's limits and the plan", withPlan, m)
			}
		}
		checkTree(t, cfg, domain, d.Children, here)
	}
}
