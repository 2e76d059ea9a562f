package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// write creates files named by the keys in a new directory and returns their
// paths in the order given by names.
func write(t *testing.T, files map[string]string, names ...string) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for _, name := range names {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(files[name]), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	return paths
}

func TestLoadMerges(t *testing.T) {
	files := map[string]string{
		"store.yaml": y("store:", "  url: redis://127.0.0.1:6379/2", "  timeout: 25ms"),
		"api.yaml":   y("policies:", "  - {name: api, algorithm: gcra, limit: 10, period: 1s}"),
		"edge.yaml":  y("domain: edge", "descriptors:", "  - {key: ip, rate_limit: {unit: second, requests_per_unit: 5}}"),
		"grpc.yaml":  y("domain: grpc", "descriptors:", "  - {key: ip, rate_limit: {unit: second, requests_per_unit: 5}}"),
	}
	paths := write(t, files, "store.yaml", "api.yaml", "edge.yaml", "grpc.yaml")
	cfg, err := Load(paths...)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Store{URL: "redis://127.0.0.1:6379/2", Timeout: 25 * time.Millisecond}); cfg.Store != want {
		t.Errorf("Store = %+v, want %+v", cfg.Store, want)
	}
	if !reflect.DeepEqual(cfg.Files, paths) {
		t.Errorf("Files = %v, want %v", cfg.Files, paths)
	}
	for _, want := range []struct {
		name, file string
		line       int
	}{{"api", paths[1], 2}, {"edge.ip", paths[2], 3}, {"grpc.ip", paths[3], 3}} {
		if p := cfg.Policy(want.name); p == nil || p.File != want.file || p.Line != want.line {
			t.Errorf("policy %s = %+v, want it from %s:%d", want.name, p, want.file, want.line)
		}
	}
	if len(cfg.Policies) != 3 || len(cfg.Domains) != 2 {
		t.Errorf("%d policies, %d domains; want 3, 2", len(cfg.Policies), len(cfg.Domains))
	}
}

func TestLoadProblems(t *testing.T) {
	files := map[string]string{
		"a.yaml":     y("store: {url: 'memory://'}", "policies:", "  - {name: x, algorithm: gcra, limit: 10, period: 1s}"),
		"b.yaml":     y("policies:", "  - {name: ok, algorithm: gcra, limit: 10, period: 1s}", "  - {name: x, algorithm: gcra, limit: 10, period: 1s}", "store: {}"),
		"edge.yaml":  y("domain: edge", "descriptors:", "  - {key: ip, rate_limit: {unit: second, requests_per_unit: 5}}"),
		"edge2.yaml": y("# the same domain again", "domain: edge", "descriptors: []"),
		"clash.yaml": y("policies:", "  - {name: edge.ip, algorithm: gcra, limit: 1, period: 1s}"),
		"bad.yaml":   y("policies:", "  - {name: y, algorithm: gcra, limit: 0, period: 1s}"),
		"big.yaml":   "# " + strings.Repeat("x", maxFileSize) + "\n",
	}
	paths := write(t, files, "a.yaml", "b.yaml", "edge.yaml", "edge2.yaml", "clash.yaml", "bad.yaml", "big.yaml")
	missing := filepath.Join(filepath.Dir(paths[0]), "missing.yaml")
	_, err := Load(append(paths, missing, paths[0])...)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Load: %v, want an *Error", err)
	}
	dir := filepath.Dir(paths[0]) + string(filepath.Separator)
	got := strings.ReplaceAll(err.Error(), dir, "")
	want := strings.Join([]string{
		"a.yaml: given twice",
		`b.yaml:3:5: policies[1].name: policy name "x" is already used at a.yaml:3; policy names must be unique across all files`,
		"b.yaml:4:1: store: a store section is already set in a.yaml:1; only one file may set it",
		`edge2.yaml:2:9: domain: domain "edge" is already defined at edge.yaml:1; a domain is defined in one file only`,
		`clash.yaml:2:5: policies[0].name: policy name "edge.ip" is already used at edge.yaml:3; policy names must be unique across all files`,
		"bad.yaml:2:39: policies[0].limit: must be at least 1, got 0",
		"big.yaml: file is larger than the maximum 4194304 bytes (4 MiB)",
		"missing.yaml: cannot open: no such file or directory",
	}, "\n")
	if got != want {
		t.Errorf("Load error:\n%s\nwant:\n%s", got, want)
	}
}

func TestLoadNoFiles(t *testing.T) {
	if _, err := Load(); err == nil || err.Error() != ": no configuration files given" {
		t.Errorf("Load() = %v", err)
	}
}

// TestEnvoyNameClash: two descriptors whose names only differ in characters a
// policy name cannot hold end up with the same name; that is reported, with
// how Envoy limits are named, rather than silently sharing counters.
func TestEnvoyNameClash(t *testing.T) {
	checkProblems(t, parseProblems(t, y("domain: d", "descriptors:",
		"  - {key: k, value: 'a b', rate_limit: {unit: second, requests_per_unit: 1}}",
		"  - {key: k, value: 'a*b', rate_limit: {unit: second, requests_per_unit: 1}}")),
		[]string{`4:40 descriptors[1].rate_limit: policy name "d.k_a_b" (an Envoy limit is named domain.key_value.key_value...) is already used at t.yaml:3`})
}

// TestExamples loads every example, alone and all together as the service
// would, and checks the policies the README and the docs rely on.
func TestExamples(t *testing.T) {
	paths, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(paths) < 3 {
		t.Fatalf("examples: %v, %v", paths, err)
	}
	for _, path := range paths {
		if _, err := Load(path); err != nil {
			t.Errorf("%v", err)
		}
	}
	cfg, err := Load(paths...)
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Policy("api_per_key"); p == nil {
		t.Error("examples/sluice.yaml has no policy api_per_key")
	}
	if cfg.Store.URL != "memory://" {
		t.Errorf("Store = %+v: the quick start must not need Redis", cfg.Store)
	}
	for _, domain := range []string{"edge_proxy", "api_gateway"} {
		if cfg.Domains[domain] == nil {
			t.Errorf("no domain %s", domain)
		}
	}
	m := cfg.Match("edge_proxy", []Entry{{"path", "/search"}, {"user_id", "u1"}})
	if len(m.Limits) != 1 || !reflect.DeepEqual(m.Limits[0].Replaces, []string{"per_user"}) {
		t.Errorf("search limit = %+v, want one replacing per_user", m)
	}
	if m := cfg.Match("edge_proxy", []Entry{{"user_agent", "kube-probe/1.30"}}); !m.Unlimited {
		t.Errorf("kube-probe: %+v, want unlimited", m)
	}
	if m := cfg.Match("api_gateway", []Entry{{"api_key", "k1"}}); len(m.Limits) != 2 {
		t.Errorf("api_key: %+v, want two limits", m)
	}
}

// Names starting with "sluice." belong to Sluice's own limits (Envoy limit
// overrides, the readiness probe), whether written or derived.
func TestReservedPrefix(t *testing.T) {
	checkProblems(t, parseProblems(t, y("policies:", "  - {name: sluice.envoy_override, algorithm: gcra, limit: 1, period: 1s}")),
		[]string{`2:5 policies[0].name: policy name "sluice.envoy_override" starts with "sluice."`})
	checkProblems(t, parseProblems(t, y("domain: sluice", "descriptors:",
		"  - {key: readyz, rate_limit: {unit: second, requests_per_unit: 1}}")),
		[]string{`3:31 descriptors[0].rate_limit: policy name "sluice.readyz" (an Envoy limit is named domain.key_value...: rename the domain) starts with`})
}
