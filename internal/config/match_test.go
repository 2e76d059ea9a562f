package config

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// levelOf builds a level from "key=value" items (value may be empty or a
// glob), as the parser would: duplicates dropped.
func levelOf(items []string) []*Descriptor {
	var level []*Descriptor
	seen := map[string]bool{}
	for _, it := range items {
		if seen[it] {
			continue
		}
		seen[it] = true
		k, v, _ := strings.Cut(it, "=")
		level = append(level, &Descriptor{Key: k, Value: v})
	}
	return level
}

// TestIndexMatchesAsScan: the index of a level finds, for every entry, the
// node a scan of the level finds: an equal value, else the first glob in
// order that matches, else the first node without a value.
func TestIndexMatchesAsScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"user", "path", "ip"}
	values := []string{"", "a", "b", "ab", "a*", "*b", "*", "a*b", "x", "*x*", "ba"}
	for round := range 500 {
		items := make([]string, 4+rng.IntN(40))
		for i := range items {
			items[i] = keys[rng.IntN(len(keys))] + "=" + values[rng.IntN(len(values))]
		}
		level := levelOf(items)
		x := indexLevel(level)
		if len(level) >= indexFrom && x == nil {
			t.Fatalf("a level of %d is not indexed", len(level))
		}
		if x == nil {
			continue
		}
		for _, k := range append(keys, "other") {
			for _, v := range append(values, "aXb", "zzz", "a*b*", "") {
				e := Entry{Key: k, Value: v}
				if got, want := x.match(e), matchLevel(level, e); got != want {
					t.Fatalf("round %d, level %v, entry %v: index %+v, scan %+v", round, items, e, got, want)
				}
			}
		}
	}
}

// TestMatchOnALargeLevel: a domain of many descriptors on one level, read
// from a file, matches by value, glob and default as a small one does.
func TestMatchOnALargeLevel(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n  - {key: user, value: \"vip*\", rate_limit: {unit: minute, requests_per_unit: 7}}\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "  - {key: user, value: u%d, rate_limit: {unit: minute, requests_per_unit: %d}}\n", i, i+1)
	}
	b.WriteString("  - {key: user, rate_limit: {unit: minute, requests_per_unit: 9999}}\n")
	cfg, err := Parse("d.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Domains["d"].index == nil {
		t.Fatal("the level is not indexed")
	}
	for value, want := range map[string]int64{"u0": 1, "u1234": 1235, "u1999": 2000, "vip7": 7, "nobody": 9999} {
		m := cfg.Match("d", []Entry{{Key: "user", Value: value}})
		if len(m.Limits) != 1 || m.Limits[0].Limit != want {
			t.Errorf("user=%s: %+v, want a limit of %d", value, m.Limits, want)
		}
	}
	if m := cfg.Match("d", []Entry{{Key: "path", Value: "u1"}}); len(m.Limits) != 0 {
		t.Errorf("another key matched %+v", m.Limits)
	}
}
