package config

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkMatch matches one request descriptor against a domain whose one
// level holds n descriptors, one per user, with the user in the middle.
func BenchmarkMatch(b *testing.B) {
	for _, n := range []int{10, 1000, 30000} {
		var sb strings.Builder
		sb.WriteString("domain: d\ndescriptors:\n")
		for i := range n {
			fmt.Fprintf(&sb, "  - {key: user, value: u%d, rate_limit: {unit: minute, requests_per_unit: 2}}\n", i)
		}
		cfg, err := Parse("d.yaml", []byte(sb.String()))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("descriptors=%d", n), func(b *testing.B) {
			e := []Entry{{Key: "user", Value: fmt.Sprint("u", n/2)}}
			for b.Loop() {
				if m := cfg.Match("d", e); len(m.Limits) != 1 {
					b.Fatal("no match")
				}
			}
		})
	}
}
