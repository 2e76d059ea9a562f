package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// FuzzDecodeOverride: no body makes the decoder panic; a refusal names a
// code and shows no Go type; an accepted override is one the store accepts
// (exactly one target, a limit valid for the policy, an expiry in the
// future).
func FuzzDecodeOverride(f *testing.F) {
	for _, seed := range []string{
		`{"key":"a","limit":5}`, `{"prefix":"acme:","limit":5,"period":"1s","burst":7,"ttl":"1h","reason":"x"}`,
		`{"key":"a","limit":5,"expires_at":"2200-01-01T00:00:00Z"}`, `{"key":"a","prefix":"b","limit":1}`,
		`{"key":null,"prefix":"p","limit":1}`, `{"key":"a","limit":1,"limit":2}`, `{"Key":"a","limit":1}`,
		`{"key":"\ud800","limit":1}`, `{"key":"a","limit":1e99}`, `[]`, `null`, ``, `{"key":"a","limit":1,"ttl":"0s"}`,
	} {
		f.Add([]byte(seed))
	}
	p := &config.Policy{Policy: sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 5, Period: time.Second}}
	now := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte) {
		o, apiErr := decodeOverride(body, p, now)
		if apiErr != nil {
			if apiErr.Code == "" || apiErr.Message == "" {
				t.Fatalf("refusal %+v", apiErr)
			}
			for _, goName := range []string{"int64", "overrideRequest", "httpapi.", "*string"} {
				if strings.Contains(apiErr.Message, goName) {
					t.Fatalf("message %q shows Go's %s", apiErr.Message, goName)
				}
			}
			return
		}
		if err := o.Validate(p.Policy, now); err != nil {
			t.Fatalf("accepted %q as %+v, which is invalid: %v", body, o, err)
		}
		if (o.Key == "") == (o.Prefix == "") {
			t.Fatalf("accepted %q with target %+v", body, o)
		}
	})
}
