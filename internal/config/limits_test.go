package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// domainFile is an envoyproxy/ratelimit file of domain with n descriptors on
// one level; those from bad on have an unknown unit.
func domainFile(domain string, n, bad int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "domain: %s\ndescriptors:\n", domain)
	for i := range n {
		unit := "minute"
		if i >= bad {
			unit = "fortnight"
		}
		fmt.Fprintf(&b, "  - {key: user, value: u%d, rate_limit: {unit: %s, requests_per_unit: 5}}\n", i, unit)
	}
	return b.String()
}

func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not an *Error", err)
	}
	return e.Problems
}

// TestLimitsDescriptors: the files of one load share the descriptor bound;
// past it the load fails with one problem naming the bound, and nothing
// after it is read (the problems the rest would have are not reported).
func TestLimitsDescriptors(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	if err := os.WriteFile(a, []byte(domainFile("a", 600, 600)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte(domainFile("b", 3000, 400)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Limits{Descriptors: 1000}.Load(a, b)
	ps := problemsOf(t, err)
	if len(ps) != 1 || ps[0].File != b || !strings.Contains(ps[0].Message, "more than 1000 descriptors") ||
		!strings.Contains(ps[0].Message, "--max-descriptors") || ps[0].Field != "descriptors[400]" {
		t.Fatalf("problems %v, want one at b.yaml descriptors[400] naming the bound of 1000", ps)
	}
	// Within a bound that holds them, the same files are read whole: b's
	// bad units are found.
	_, err = Limits{Descriptors: 3600}.Load(a, b)
	if ps := problemsOf(t, err); len(ps) < 100 || !strings.Contains(ps[0].Message, "unknown unit") {
		t.Fatalf("within the bound: %d problems, first %v; want b's unknown units", len(ps), ps[0])
	}
	if err := os.WriteFile(b, []byte(domainFile("b", 3000, 3000)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Limits{Descriptors: 3600}.Load(a, b)
	if err != nil || len(cfg.Policies) != 3600 {
		t.Fatalf("3,600 descriptors within a bound of 3,600: %v", err)
	}
	// The default bound.
	if got := (Limits{}).WithDefaults(); got.Descriptors != DefaultMaxDescriptors || got.Depth != DefaultMaxDepth {
		t.Errorf("defaults %+v", got)
	}
}

// TestLimitsDepth: descriptors deeper than the bound are refused with the
// bound; at the bound they are read.
func TestLimitsDepth(t *testing.T) {
	tree := func(depth int) Document {
		root := "domain: d\ndescriptors: "
		inner := "{key: k, rate_limit: {unit: second, requests_per_unit: 1}}"
		for range depth - 1 {
			inner = "{key: k, descriptors: [" + inner + "]}"
		}
		return Document{Source: "xds:d", Root: rootOf(t, root+"["+inner+"]")}
	}
	if _, err := (Limits{Depth: 3}).ParseDocuments(tree(3)); err != nil {
		t.Fatalf("depth 3 within a bound of 3: %v", err)
	}
	_, err := Limits{Depth: 3}.ParseDocuments(tree(4))
	if ps := problemsOf(t, err); len(ps) != 1 || !strings.Contains(ps[0].Message, "deeper than 3 levels") {
		t.Fatalf("depth 4 over a bound of 3: %v", ps)
	}
	if _, err := ParseDocuments(tree(DefaultMaxDepth)); err != nil {
		t.Fatalf("the default depth: %v", err)
	}
	if got := (Limits{Depth: 1 << 20}).WithDefaults().Depth; got != MaxDepthLimit {
		t.Errorf("a depth of 2^20 is capped at %d, want %d", got, MaxDepthLimit)
	}
}
