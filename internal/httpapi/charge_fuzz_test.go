package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// FuzzDecodeChargeRequest: no body makes the decoder panic; every body it
// accepts names a policy that exists and carries a cost, and encoding/json
// reads the same charge from it; every refusal is a 4xx with a code and a
// message that shows no Go type.
func FuzzDecodeChargeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"policy":"p","key":"alice","cost":15}`, `{"policy":"p","key":"alice","cost":0}`,
		`{"policy":"p","key":"alice"}`, `{"policy":"p","key":"a","cost":-1}`,
		`{"policy":"p","key":"a","cost":1e99}`, `{"policy":"p","key":"a","cost":9223372036854775808}`,
		`{"policy":"nope","key":"a","cost":1}`, `{"policy":"p","key":"a","cost":1} x`,
		`{"policy":"p","key":"a","cost":null}`, `{"checks":[]}`, `[]`, `null`, ``,
		`{"policy":"p","key":"\ud83d","cost":1}`, `{"policy":"p","key":"a","cost":1,"plan":"pro"}`,
		`{"policy":"p","policy":"p","key":"a","cost":1}`,
	} {
		f.Add([]byte(seed))
	}
	cfg := &config.Config{Policies: map[string]*config.Policy{
		"p": {Policy: sluice.Policy{Name: "p", Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second}},
	}}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, status, apiErr := decodeChargeRequest(body, cfg)
		if apiErr != nil {
			if status < 400 || status > 499 || apiErr.Code == "" || apiErr.Message == "" {
				t.Fatalf("refusal %d %+v", status, apiErr)
			}
			for _, goName := range []string{"int64", "chargeJSON", "httpapi."} {
				if strings.Contains(apiErr.Message, goName) {
					t.Fatalf("message %q shows Go's %s", apiErr.Message, goName)
				}
			}
			return
		}
		if c.Policy == nil || cfg.Policies[c.Policy.Name] != c.Policy {
			t.Fatalf("accepted a charge of policy %v", c.Policy)
		}
		if !utf8.Valid(body) {
			t.Fatalf("accepted a body that is not UTF-8: %q", body)
		}
		var lax chargeJSON
		if err := json.Unmarshal(body, &lax); err != nil {
			t.Fatalf("encoding/json refuses an accepted body %q: %v", body, err)
		}
		if lax.Cost == nil || *lax.Cost != c.Cost || lax.Key != c.Key || lax.Plan != c.Plan || lax.Policy != c.Policy.Name {
			t.Fatalf("encoding/json reads %+v, the decoder %+v", lax, c)
		}
	})
}
