package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// BenchmarkDecodeCheckRequest measures the strict decoder on one check and
// on a full batch, beside encoding/json reading the same body into structs
// (laxer, for reference: what strictness costs).
func BenchmarkDecodeCheckRequest(b *testing.B) {
	cfg := &config.Config{Policies: map[string]*config.Policy{
		"api": {Policy: sluice.Policy{Name: "api", Algorithm: sluice.GCRA, Limit: 5, Period: time.Second}},
	}}
	items := make([]string, DefaultMaxChecks)
	for i := range items {
		items[i] = fmt.Sprintf(`{"policy":"api","key":"user-%d","cost":1}`, i)
	}
	for _, c := range []struct{ name, body string }{
		{"one", `{"policy":"api","key":"alice","cost":1}`},
		{"batch64", `{"checks":[` + strings.Join(items, ",") + `]}`},
	} {
		body := []byte(c.body)
		b.Run(c.name+"/strict", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := decodeCheckRequest(body, cfg, DefaultMaxChecks); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/encoding_json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var req struct {
					laxCheck
					Checks []laxCheck `json:"checks"`
				}
				if err := json.Unmarshal(body, &req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
