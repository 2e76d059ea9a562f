package config

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func parseAs(t *testing.T, file, text string) *Config {
	t.Helper()
	cfg, err := Parse(file, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func rootOf(t *testing.T, text string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

// TestParseDocuments: documents in memory are read and merged as files are.
func TestParseDocuments(t *testing.T) {
	cfg, err := ParseDocuments(
		Document{Source: "a", Root: rootOf(t, "domain: a\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]")},
		Document{Source: "b", Root: rootOf(t, "policies: [{name: p, algorithm: gcra, limit: 1, period: 1s}]")})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Policy("a.k") == nil || cfg.Policy("p") == nil || cfg.Domains["a"] == nil || strings.Join(cfg.Files, ",") != "a,b" {
		t.Errorf("got %+v", cfg)
	}
	_, err = ParseDocuments(
		Document{Source: "one", Root: rootOf(t, "domain: a")},
		Document{Source: "two", Root: rootOf(t, "domain: a\ndescriptors: [{key: k, rate_limit: {unit: lightyear}}]")},
		Document{Source: "three"})
	for _, want := range []string{`domain: domain "a" is already defined at one:1;`, `descriptors[0].rate_limit.unit: unknown unit "lightyear"`,
		"descriptors[0].rate_limit.requests_per_unit: required field is missing", "three: document is empty"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// TestOverlay: top's domains replace base's with their limits; other
// domains and policies of both stay; a policy name in both is an error;
// neither input changes.
func TestOverlay(t *testing.T) {
	base := parseAs(t, "base.yaml", `
domain: edge
descriptors:
  - {key: user, rate_limit: {unit: minute, requests_per_unit: 1}}
  - {key: ip, rate_limit: {unit: minute, requests_per_unit: 2}}
`)
	other := parseAs(t, "other.yaml", "domain: other\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 3}}]")
	base.Domains["other"], base.Policies["other.k"] = other.Domains["other"], other.Policies["other.k"]
	top := parseAs(t, "xds:edge", "domain: edge\ndescriptors: [{key: user, rate_limit: {unit: minute, requests_per_unit: 9}}]")

	got, err := Overlay(base, top)
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Policy("edge.user"); p == nil || p.Limit != 9 {
		t.Errorf("edge.user: %+v, want top's limit 9", p)
	}
	if got.Policy("edge.ip") != nil {
		t.Error("edge.ip of base's replaced domain is still there")
	}
	if got.Policy("other.k") == nil || got.Domains["other"] == nil {
		t.Error("base's other domain is gone")
	}
	if base.Policy("edge.ip") == nil || base.Policy("edge.user").Limit != 1 || base.Domains["edge"] == got.Domains["edge"] {
		t.Error("Overlay changed base")
	}
	if strings.Join(got.Files, ",") != "base.yaml,xds:edge" {
		t.Errorf("files %v", got.Files)
	}

	clash := parseAs(t, "xds:clash", "domain: other.k\ndescriptors: []\n")
	clash.Policies["other.k"] = top.Policies["edge.user"]
	if _, err := Overlay(base, clash); err == nil || !strings.Contains(err.Error(), `policy name "other.k" is already used at other.yaml`) {
		t.Errorf("clash: %v", err)
	}
	withStore := parseAs(t, "xds:store", "store: {url: memory://}\n")
	if _, err := Overlay(base, withStore); err == nil || !strings.Contains(err.Error(), "cannot set the store") {
		t.Errorf("store in top: %v", err)
	}
}
