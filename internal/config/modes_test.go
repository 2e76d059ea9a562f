package config

import "testing"

// TestWithModes: SHADOW_MODE and QUOTA_MODE change every limit of the
// domains, on the tree and in Policies alike (one *Policy, found either
// way), and the domains themselves for shadow; native policies and the
// configuration given are left as they were.
func TestWithModes(t *testing.T) {
	paths := write(t, map[string]string{"edge.yaml": `domain: edge
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 5}
    descriptors:
      - key: path
        quota_mode: true
        rate_limit: {unit: minute, requests_per_unit: 50}
  - key: ip
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 100}
`, "native.yaml": "policies:\n  - {name: api, algorithm: gcra, limit: 10, period: 1s}\n"}, "edge.yaml", "native.yaml")
	cfg, err := Load(paths...)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.WithModes(Modes{}) != cfg {
		t.Fatal("no mode: the configuration should be the same")
	}
	type flags struct{ shadow, quota bool }
	check := func(name string, c *Config, domainShadow bool, want map[string]flags) {
		t.Helper()
		d := c.Domains["edge"]
		if d.Shadow != domainShadow {
			t.Errorf("%s: domain shadow %v, want %v", name, d.Shadow, domainShadow)
		}
		user := d.Descriptors[0]
		onTree := map[string]*Policy{user.Limits[0].Name: user.Limits[0], user.Children[0].Limits[0].Name: user.Children[0].Limits[0],
			d.Descriptors[1].Limits[0].Name: d.Descriptors[1].Limits[0]}
		for pname, w := range want {
			p := c.Policies[pname]
			if p == nil {
				t.Fatalf("%s: no policy %s in %v", name, pname, c.Policies)
			}
			if tree, ok := onTree[pname]; ok && tree != p {
				t.Errorf("%s: %s is one policy on the tree and another in Policies", name, pname)
			}
			if (flags{p.Shadow, p.QuotaMode}) != w {
				t.Errorf("%s: %s shadow %v quota %v, want %+v", name, pname, p.Shadow, p.QuotaMode, w)
			}
		}
	}
	asLoaded := map[string]flags{"edge.user": {}, "edge.user.path": {true, true}, "edge.ip": {true, false}, "api": {}}
	check("loaded", cfg, false, asLoaded)
	check("shadow", cfg.WithModes(Modes{Shadow: true}), true,
		map[string]flags{"edge.user": {true, false}, "edge.user.path": {true, true}, "edge.ip": {true, false}, "api": {}})
	check("quota", cfg.WithModes(Modes{Quota: true}), false,
		map[string]flags{"edge.user": {true, true}, "edge.user.path": {true, true}, "edge.ip": {true, true}, "api": {}})
	check("both", cfg.WithModes(Modes{Shadow: true, Quota: true}), true,
		map[string]flags{"edge.user": {true, true}, "edge.user.path": {true, true}, "edge.ip": {true, true}, "api": {}})
	check("still as loaded", cfg, false, asLoaded)
}
