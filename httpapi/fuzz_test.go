package httpapi

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// FuzzDecodeCheckRequest: no body makes the decoder panic, and every body it
// accepts yields between 1 and maxChecks checks of policies that exist;
// every refusal is a 4xx with a code and a message.
func FuzzDecodeCheckRequest(f *testing.F) {
	for _, seed := range []string{
		`{"policy":"p","key":"alice"}`,
		`{"policy":"p","key":"alice","cost":0}`,
		`{"checks":[{"policy":"p","key":"a"},{"policy":"q","key":"b","cost":3}]}`,
		`{"checks":[]}`, `{"policy":"nope","key":"a"}`, `{"policy":"p","key":"a"} x`,
		`{"policy":"p","key":"a","cost":1e99}`, `[]`, `null`, `{"checks":null}`, ``,
	} {
		f.Add([]byte(seed))
	}
	cfg := &config.Config{Policies: map[string]*config.Policy{}}
	for _, name := range []string{"p", "q"} {
		cfg.Policies[name] = &config.Policy{Policy: sluice.Policy{Name: name, Algorithm: sluice.GCRA, Limit: 5, Period: time.Second}}
	}
	const maxChecks = 4
	f.Fuzz(func(t *testing.T, body []byte) {
		checks, status, apiErr := decodeCheckRequest(body, cfg, maxChecks)
		if apiErr != nil {
			if status < 400 || status > 499 || apiErr.Code == "" || apiErr.Message == "" {
				t.Fatalf("refusal %d %+v", status, apiErr)
			}
			if checks != nil {
				t.Fatal("checks returned with an error")
			}
			return
		}
		if len(checks) == 0 || len(checks) > maxChecks {
			t.Fatalf("%d checks accepted", len(checks))
		}
		for _, c := range checks {
			if c.Policy == nil || cfg.Policies[c.Policy.Name] != c.Policy {
				t.Fatalf("a check of an unknown policy: %+v", c)
			}
		}
	})
}
