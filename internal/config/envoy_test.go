package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	cfg, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	return cfg
}

// TestEnvoyLimits checks what each rate_limit block becomes: ratelimit's
// defaults, its units (case-insensitive, a month of 30 days) and Sluice's
// extensions.
func TestEnvoyLimits(t *testing.T) {
	fw := sluice.FixedWindow
	for _, tc := range []struct {
		name, block string
		want        Policy // File is always t.yaml; Name is d.k
	}{
		{"second", "{unit: second, requests_per_unit: 5}", Policy{Policy: sluice.Policy{Algorithm: fw, Limit: 5, Period: time.Second}}},
		{"MINUTE", "{unit: MINUTE, requests_per_unit: 5}", Policy{Policy: sluice.Policy{Algorithm: fw, Limit: 5, Period: time.Minute}}},
		{"Hour", "{unit: Hour, requests_per_unit: 5}", Policy{Policy: sluice.Policy{Algorithm: fw, Limit: 5, Period: time.Hour}}},
		{"day", "{unit: day, requests_per_unit: 5}", Policy{Policy: sluice.Policy{Algorithm: fw, Limit: 5, Period: 24 * time.Hour}}},
		{"week", "{unit: week, requests_per_unit: 5}", Policy{Policy: sluice.Policy{Algorithm: fw, Limit: 5, Period: 7 * 24 * time.Hour}}},
		{"month", "{unit: month, requests_per_unit: 5}", Policy{Policy: sluice.Policy{Algorithm: fw, Limit: 5, Period: 30 * 24 * time.Hour}}},
		{"year", "{unit: year, requests_per_unit: 5}", Policy{Policy: sluice.Policy{Algorithm: fw, Limit: 5, Period: 365 * 24 * time.Hour}}},
		{"extensions", "{algorithm: gcra, period: 90s, requests_per_unit: 30, burst: 10}",
			Policy{Policy: sluice.Policy{Algorithm: sluice.GCRA, Limit: 30, Period: 90 * time.Second, Burst: 10}}},
		{"unit_multiplier", "{unit: minute, requests_per_unit: 20, unit_multiplier: 5}", Policy{Policy: sluice.Policy{Algorithm: fw, Limit: 20, Period: 5 * time.Minute}}},
		{"name and replaces", "{name: me, replaces: [{name: a}, {name: b}], unit: second, requests_per_unit: 1}",
			Policy{Policy: sluice.Policy{Algorithm: fw, Limit: 1, Period: time.Second}, RuleName: "me", Replaces: []string{"a", "b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, y("domain: d", "descriptors:", "  - key: k", "    rate_limit: "+tc.block))
			want := tc.want
			want.Name, want.File, want.Line = "d.k", "t.yaml", 4
			if got := cfg.Policies["d.k"]; got == nil || !reflect.DeepEqual(*got, want) {
				t.Errorf("policy = %+v, want %+v", got, want)
			}
		})
	}
}

// TestEnvoyTree checks the tree built from a file, with every descriptor
// feature, and that each limit is also in Policies.
func TestEnvoyTree(t *testing.T) {
	cfg := mustParse(t, y(
		"---",
		"domain: d",
		"descriptors:",
		"  - key: a",
		"    value: 500", // not a string in YAML; ratelimit reads it as "500"
		"    shadow_mode: true",
		"    detailed_metric: true",
		"    value_to_metric: true",
		"    rate_limits:",
		"      - {unit: second, requests_per_unit: 1}",
		"      - {unit: hour, requests_per_unit: 100}",
		"    descriptors:",
		"      - key: b",
		"        rate_limit: {unlimited: true, name: ignored}",
		"      - key: c",
		"        value: 'x*'",
		"        rate_limits:",
		"          - {unit: minute, requests_per_unit: 2}",
		"  - key: e",
	))
	d := cfg.Domains["d"]
	if d == nil || d.Name != "d" || len(d.Descriptors) != 2 {
		t.Fatalf("domain = %+v", d)
	}
	a := d.Descriptors[0]
	if a.Key != "a" || a.Value != "500" || a.Unlimited || len(a.Limits) != 2 || len(a.Children) != 2 {
		t.Fatalf("descriptor a = %+v", a)
	}
	for i, want := range []struct {
		name  string
		line  int
		limit int64
	}{{"d.a_500.1", 10, 1}, {"d.a_500.2", 11, 100}} {
		if p := a.Limits[i]; p.Name != want.name || p.Line != want.line || p.Limit != want.limit || !p.Shadow || cfg.Policies[p.Name] != p {
			t.Errorf("a.Limits[%d] = %+v, want %s at line %d, shadow, in Policies", i, p, want.name, want.line)
		}
	}
	if b := a.Children[0]; b.Key != "b" || !b.Unlimited || len(b.Limits) != 0 {
		t.Errorf("descriptor b = %+v, want unlimited without limits", b)
	}
	if c := a.Children[1]; c.Value != "x*" || len(c.Limits) != 1 || c.Limits[0].Name != "d.a_500.c_x_" || c.Limits[0].Shadow {
		t.Errorf("descriptor c = %+v, want one limit d.a_500.c_x_ (one rate_limits item: no suffix), not shadow", c)
	}
	if e := d.Descriptors[1]; e.Key != "e" || e.Value != "" || len(e.Limits) != 0 || e.Unlimited {
		t.Errorf("descriptor e = %+v", e)
	}
	if len(cfg.Policies) != 3 {
		t.Errorf("%d policies, want 3", len(cfg.Policies))
	}
}

func TestPolicyName(t *testing.T) {
	k := func(n int) string { return strings.Repeat("k", n) }
	for _, tc := range []struct {
		parts []string
		want  string
	}{
		{[]string{"edge", ".generic_key_foo", ".user"}, "edge.generic_key_foo.user"},
		{[]string{"d", ".path_/api/v1/*"}, "d.path_/api/v1/_"},
		{[]string{"d", ".ip_10.0.0.1:80"}, "d.ip_10.0.0.1:80"},
		{[]string{"d", ".k_a b\tc"}, "d.k_a_b_c"},
		{[]string{"d", ".city_Zürich"}, "d.city_Z_rich"}, // one _ per character, not per byte
		{[]string{"d", ".k_\xff"}, "d.k__"},              // invalid UTF-8
		{[]string{"d", "." + k(126)}, "d." + k(126)},     // 128 bytes: kept whole
		// Longer: a 111-byte prefix, ".", 16 hex digits of the hash chained
		// over the parts (computed independently: h = SHA-256(h ‖ part)).
		{[]string{"d", "." + k(125) + "kx"}, "d." + k(109) + ".a6d8971376b16eb8"},
		{[]string{"d", "." + k(200)}, "d." + k(109) + ".956d82c6e19e037b"},
		{[]string{"d", "." + strings.Repeat("ü", 200)}, "d." + strings.Repeat("_", 109) + ".7f07d2dca089df5c"},
	} {
		var n name
		for _, part := range tc.parts {
			n = n.child(part)
		}
		got := n.String()
		if got != tc.want {
			t.Errorf("name%q = %q, want %q", tc.parts, got, tc.want)
		}
		if err := (&sluice.Policy{Name: got, Algorithm: sluice.GCRA, Limit: 1, Period: time.Second}).Validate(); err != nil {
			t.Errorf("name%q = %q: %v", tc.parts, got, err)
		}
	}
	long := name{}.child("d").child("." + k(200))
	if a, b := long.child("a").String(), long.child("b").String(); a == b || len(a) != sluice.MaxNameLen {
		t.Errorf("long names differing at the end: %q, %q; want distinct, %d bytes", a, b, sluice.MaxNameLen)
	}
}

// TestDerivedNamesStable checks that a limit's name, which keys its counters,
// depends only on where it sits: not on its settings, nor on the other
// descriptors of the file.
func TestDerivedNamesStable(t *testing.T) {
	before := mustParse(t, y("domain: edge", "descriptors:",
		"  - key: generic_key", "    value: foo", "    descriptors:",
		"      - {key: user, rate_limit: {unit: second, requests_per_unit: 5}}"))
	after := mustParse(t, y("domain: edge", "descriptors:",
		"  - {key: other, rate_limit: {unit: day, requests_per_unit: 1}}",
		"  - key: generic_key", "    value: foo", "    descriptors:",
		"      - {key: user, rate_limit: {algorithm: gcra, unit: minute, requests_per_unit: 50, burst: 9}}"))
	for _, cfg := range []*Config{before, after} {
		if cfg.Policies["edge.generic_key_foo.user"] == nil {
			t.Errorf("no policy edge.generic_key_foo.user in %v", cfg.Policies)
		}
	}
}

func TestMatch(t *testing.T) {
	cfg := mustParse(t, y(
		"domain: d",
		"descriptors:",
		"  - {key: ip, rate_limit: {unit: second, requests_per_unit: 1}}",
		"  - {key: ip, value: '10.*', rate_limit: {unit: second, requests_per_unit: 2}}",
		"  - {key: ip, value: '10.0.*', rate_limit: {unit: second, requests_per_unit: 3}}",
		"  - {key: ip, value: 10.0.0.1, rate_limit: {unit: second, requests_per_unit: 4}}",
		"  - {key: agent, value: 'probe*', rate_limit: {unlimited: true}}",
		"  - key: client",
		"    descriptors:",
		"      - key: path",
		"        rate_limit: {unit: second, requests_per_unit: 5}",
		"        descriptors:",
		"          - {key: method, value: POST, rate_limit: {unit: second, requests_per_unit: 6}}",
	))
	limit := func(entries ...string) any {
		var es []Entry
		for i := 0; i+1 < len(entries); i += 2 {
			es = append(es, Entry{entries[i], entries[i+1]})
		}
		m := cfg.Match("d", es)
		switch {
		case m.Unlimited:
			return "unlimited"
		case len(m.Limits) == 0:
			return "none"
		}
		return m.Limits[0].Limit
	}
	for _, tc := range []struct {
		name    string
		entries []string
		want    any
	}{
		{"exact beats wildcard", []string{"ip", "10.0.0.1"}, int64(4)},
		{"wildcard beats default", []string{"ip", "10.9.9.9"}, int64(2)},
		{"first wildcard in file order", []string{"ip", "10.0.0.2"}, int64(2)},
		{"default", []string{"ip", "192.0.2.1"}, int64(1)},
		{"empty value matches the default", []string{"ip", ""}, int64(1)},
		{"unlimited", []string{"agent", "probe/1.0"}, "unlimited"},
		{"wildcard that does not match", []string{"agent", "curl"}, "none"},
		{"unknown key", []string{"user", "x"}, "none"},
		{"partial descriptor", []string{"client", "c1"}, "none"},
		{"second level", []string{"client", "c1", "path", "/"}, int64(5)},
		{"third level", []string{"client", "c1", "path", "/", "method", "POST"}, int64(6)},
		{"third level, no match", []string{"client", "c1", "path", "/", "method", "GET"}, "none"},
		{"longer than the tree", []string{"ip", "10.0.0.1", "path", "/"}, "none"},
		{"entries in the wrong order", []string{"path", "/", "client", "c1"}, "none"},
		{"no entries", nil, "none"},
	} {
		if got := limit(tc.entries...); got != tc.want {
			t.Errorf("%s: Match(%v) = %v, want %v", tc.name, tc.entries, got, tc.want)
		}
	}
	if m := cfg.Match("other", []Entry{{"ip", "10.0.0.1"}}); len(m.Limits) != 0 || m.Unlimited {
		t.Errorf("unknown domain matched %+v", m)
	}
}

// TestEnvoyZeroLimit: requests_per_unit: 0, envoyproxy/ratelimit's ban, loads
// as a policy that denies everything; a negative count is still an error.
func TestEnvoyZeroLimit(t *testing.T) {
	cfg, err := Parse("z.yaml", []byte("domain: d\ndescriptors:\n  - key: user\n    value: banned\n    rate_limit: {unit: minute, requests_per_unit: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Match("d", []Entry{{Key: "user", Value: "banned"}})
	if len(m.Limits) != 1 || !m.Limits[0].DeniesAll() || m.Limits[0].Period != time.Minute {
		t.Fatalf("match: %+v", m.Limits)
	}
	if _, err := Parse("z.yaml", []byte("domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: -1}\n")); err == nil {
		t.Fatal("requests_per_unit: -1 accepted")
	}
}
