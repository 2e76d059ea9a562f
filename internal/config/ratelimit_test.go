package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Configurations of every shape envoyproxy/ratelimit ships and loads
// (testdata/ratelimit, written for these tests), and what they mean.

// TestRatelimitShapesLoad: each file loads alone, and all of them together.
func TestRatelimitShapesLoad(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "ratelimit", "*.yaml"))
	if err != nil || len(files) < 9 {
		t.Fatalf("%d files, %v", len(files), err)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	cfg, err := Load(files...)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Domains) != len(files) {
		t.Fatalf("%d domains from %d files", len(cfg.Domains), len(files))
	}
}

func loadShape(t *testing.T, name string) *Config {
	t.Helper()
	cfg, err := Load(filepath.Join("testdata", "ratelimit", name))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// matchOne returns the single limit entries match, or nil.
func matchOne(t *testing.T, cfg *Config, domain string, entries ...Entry) *Policy {
	t.Helper()
	m := cfg.Match(domain, entries)
	switch len(m.Limits) {
	case 0:
		return nil
	case 1:
		return m.Limits[0]
	}
	t.Fatalf("%v: %d limits", entries, len(m.Limits))
	return nil
}

// TestRatelimitBasicShape: ratelimit's precedence on its basic test file: a
// value beats the default, a node without a limit allows, a longer request
// than the tree matches nothing, and a limit needs every entry matched.
func TestRatelimitBasicShape(t *testing.T) {
	cfg := loadShape(t, "basic.yaml")
	const d = "shapes-basic"
	for _, c := range []struct {
		entries []Entry
		limit   int64 // -1: no limit
		period  time.Duration
	}{
		{[]Entry{{"tenant", "acme"}}, -1, 0},
		{[]Entry{{"tenant", "acme"}, {"route", "x"}}, 5, time.Second},
		{[]Entry{{"tenant", "acme"}, {"route", "upload"}}, 10, time.Second},
		{[]Entry{{"tenant", "other"}, {"route", "x"}}, -1, 0},
		{[]Entry{{"client", "x"}}, 20, time.Minute},
		{[]Entry{{"client", "partner"}}, 30, time.Minute},
		{[]Entry{{"client", "internal"}}, -1, 0},
		{[]Entry{{"hourly", "x"}}, 1, time.Hour},
		{[]Entry{{"daily", "x"}}, 1, 24 * time.Hour},
		{[]Entry{{"daily", "x"}, {"sub", "v"}}, 25, 24 * time.Hour},
		{[]Entry{{"daily", "x"}, {"sub", "w"}}, -1, 0},
		{[]Entry{{"client", "x"}, {"more", "y"}}, -1, 0},
	} {
		p := matchOne(t, cfg, d, c.entries...)
		switch {
		case c.limit < 0 && p != nil:
			t.Errorf("%v: %q, want no limit", c.entries, p.Name)
		case c.limit >= 0 && (p == nil || p.Limit != c.limit || p.Period != c.period):
			t.Errorf("%v: %+v, want %d per %v", c.entries, p, c.limit, c.period)
		}
	}
	if m := cfg.Match(d, []Entry{{"free", "x"}}); !m.Unlimited {
		t.Errorf("free: %+v, want unlimited", m)
	}
}

// TestGlobs: ratelimit's wildcard test vectors — a * anywhere in a value is a
// glob (midWild: bar*b matches barb), a value without * is exact, and at one
// level an exact value beats the first matching glob in file order, which
// beats the default.
func TestGlobs(t *testing.T) {
	cfg := loadShape(t, "wildcard.yaml")
	const d = "shapes-wildcard"
	for _, c := range []struct {
		key, value string
		match      bool
	}{
		{"path", "/api/", true}, {"path", "/api/x/y", true}, {"path", "/api", false}, {"path", "x/api/", false},
		{"exact", "/api", true}, {"exact", "/api/x", false},
		{"any", "", true}, {"any", "whatever", true},
		{"inner", "abz", true}, {"inner", "ab-z", true}, {"inner", "abzz", true}, {"inner", "abz-", false}, {"inner", "az", false}, {"inner", "ab*z", true},
		{"many", "v1rpc", true}, {"many", "x-v1-y-rpc", true}, {"many", "v1rpcx", false}, {"many", "rpcv1", false},
	} {
		if got := matchOne(t, cfg, d, Entry{c.key, c.value}) != nil; got != c.match {
			t.Errorf("%s=%q: matched %v, want %v", c.key, c.value, got, c.match)
		}
	}
	// Precedence at one level.
	prec := mustParse(t, `domain: p
descriptors:
  - {key: k, rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: k, value: "a*c", rate_limit: {unit: second, requests_per_unit: 2}}
  - {key: k, value: "ab*", rate_limit: {unit: second, requests_per_unit: 3}}
  - {key: k, value: "abc", rate_limit: {unit: second, requests_per_unit: 4}}
  - {key: k, value: "*", rate_limit: {unit: second, requests_per_unit: 5}}
`)
	for value, want := range map[string]int64{"abc": 4, "axc": 2, "abd": 3, "abxc": 2, "zzz": 5, "": 5} {
		if p := matchOne(t, prec, "p", Entry{"k", value}); p == nil || p.Limit != want {
			t.Errorf("k=%q: %+v, want the limit of %d", value, p, want)
		}
	}
}

// TestGlob compares Glob with a direct definition on every short pattern
// and value over a small alphabet.
func TestGlob(t *testing.T) {
	var strs []string
	var gen func(s string, n int)
	gen = func(s string, n int) {
		strs = append(strs, s)
		if n == 0 {
			return
		}
		for _, c := range []string{"a", "b", "*"} {
			gen(s+c, n-1)
		}
	}
	gen("", 5)
	var naive func(p, v string) bool
	naive = func(p, v string) bool {
		switch {
		case p == "":
			return v == ""
		case p[0] == '*':
			for i := 0; i <= len(v); i++ {
				if naive(p[1:], v[i:]) {
					return true
				}
			}
			return false
		default:
			return v != "" && p[0] == v[0] && naive(p[1:], v[1:])
		}
	}
	for _, p := range strs {
		for _, v := range strs {
			if Glob(p, v) != naive(p, v) {
				t.Fatalf("Glob(%q, %q) = %v", p, v, Glob(p, v))
			}
		}
	}
}

// TestShareThreshold: MatchShared writes the glob over each value a shared
// node matched, so those values make one store key; an exact value beside it
// and a node with share_threshold: false keep the value.
func TestShareThreshold(t *testing.T) {
	cfg := loadShape(t, "share.yaml")
	const d = "shapes-share"
	for _, c := range []struct {
		in, want []Entry
	}{
		{[]Entry{{"files", "files/a.pdf"}}, []Entry{{"files", "files/*"}}},
		{[]Entry{{"parent", "p"}, {"files", "nested/x"}}, []Entry{{"parent", "p"}, {"files", "nested/*"}}},
		{[]Entry{{"user", "user/42"}, {"action", "read"}}, []Entry{{"user", "user/*"}, {"action", "read"}}},
		{[]Entry{{"file", "test1"}}, []Entry{{"file", "test1"}}},
		{[]Entry{{"file", "test2"}}, []Entry{{"file", "test*"}}},
		{[]Entry{{"route", "/api/x/v1"}}, []Entry{{"route", "/api*v1"}}},
		{[]Entry{{"mixed", "m/1"}}, []Entry{{"mixed", "m/1"}}},
		{[]Entry{{"nothing", "x"}}, []Entry{{"nothing", "x"}}},
	} {
		got := slices.Clone(c.in)
		m := cfg.MatchShared(d, got)
		if !slices.Equal(got, c.want) {
			t.Errorf("MatchShared(%v) wrote %v, want %v", c.in, got, c.want)
		}
		if plain := cfg.Match(d, c.in); !slices.Equal(plain.Limits, m.Limits) {
			t.Errorf("%v: Match and MatchShared disagree", c.in)
		}
	}
}

// TestQuotaModeLoads: quota_mode marks the limit (which is then never
// enforced through the HTTP API: shadow); metadata is accepted anywhere.
func TestQuotaModeLoads(t *testing.T) {
	cfg := loadShape(t, "quota.yaml")
	for _, v := range []string{"primary", "secondary"} {
		p := matchOne(t, cfg, "shapes-quota", Entry{"backend", v})
		if p == nil || !p.QuotaMode || !p.Shadow {
			t.Errorf("backend=%s: %+v, want a quota-mode limit", v, p)
		}
	}
	meta := loadShape(t, "metadata.yaml")
	if p := matchOne(t, meta, "shapes-metadata", Entry{"client", "x"}); p == nil || p.Limit != 20 {
		t.Errorf("metadata changed the limit: %+v", p)
	}
	if _, err := os.Stat(filepath.Join("testdata", "ratelimit", "multiplier.yaml")); err != nil {
		t.Fatal(err)
	}
	if p := matchOne(t, loadShape(t, "multiplier.yaml"), "shapes-multiplier", Entry{"five_minutes", "x"}); p == nil || p.Period != 5*time.Minute {
		t.Errorf("unit_multiplier: %+v, want a 5-minute window", p)
	}
}
