package httpapi_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/httpapi"
)

// batch is a /v1/check body of n per_user checks of distinct keys.
func batch(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"policy":"per_user","key":"k%d"}`, i)
	}
	return `{"checks":[` + strings.Join(items, ",") + `]}`
}

// TestDefaultCaps: with the default caps, a request at each cap is decided
// and one past it is a 4xx whose message names the cap and does not echo the
// request's key.
func TestDefaultCaps(t *testing.T) {
	e := newMemoryEnv(t)
	single := `{"policy":"per_user","key":"padded"}`
	padTo := func(n int) string { return single + strings.Repeat(" ", n-len(single)) }
	longKey := strings.Repeat("k", sluice.MaxKeyLen+1)
	cases := []struct {
		name   string
		body   string
		status int
		code   string
		field  string
		msg    string // in the error's message
	}{
		{"body at the cap", padTo(httpapi.DefaultMaxBodyBytes), 200, "", "", ""},
		{"body over the cap", padTo(httpapi.DefaultMaxBodyBytes + 1), 413, "body_too_large", "", "65536 bytes"},
		{"max checks", batch(httpapi.DefaultMaxChecks), 200, "", "", ""},
		{"too many checks", batch(httpapi.DefaultMaxChecks + 1), 400, "too_many_checks", "checks", "at most 64 per request"},
		{"key at the cap", `{"policy":"per_user","key":"` + longKey[:sluice.MaxKeyLen] + `"}`, 200, "", "", ""},
		{"key over the cap", `{"policy":"per_user","key":"` + longKey + `"}`, 400, "invalid_check", "key", "1025 bytes, longer than the maximum 1024"},
		{"key over the cap in a batch", `{"checks":[{"policy":"global","key":"a"},{"policy":"per_user","key":"` + longKey + `"}]}`,
			400, "invalid_check", "checks[1].key", "longer than the maximum 1024"},
		{"malformed JSON", `{"policy":"per_user","key":`, 400, "malformed_json", "", ""},
		{"invalid JSON", `{"policy":"per_user",,}`, 400, "malformed_json", "", "invalid JSON at byte"},
		{"not an object", `["per_user","a"]`, 400, "malformed_json", "", "JSON"},
		{"two objects", `{"policy":"per_user","key":"a"}{}`, 400, "malformed_json", "", "a single JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := e.post("/v1/check", c.body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d (%+v)", resp.StatusCode, c.status, body.Error)
			}
			if c.code == "" {
				if body.Error != nil || len(body.Checks) == 0 {
					t.Fatalf("%+v", body)
				}
				return
			}
			if body.Error == nil || body.Error.Code != c.code || body.Error.Field != c.field || !strings.Contains(body.Error.Message, c.msg) {
				t.Fatalf("error %+v, want code %s, field %q, a message mentioning %q", body.Error, c.code, c.field, c.msg)
			}
			if strings.Contains(body.Error.Message, "kkkk") {
				t.Fatalf("the message echoes the key: %.200s", body.Error.Message)
			}
		})
	}
}

// TestMetricsNeverLabelKeys: whatever clients send, the metrics name
// policies, never keys, and never a policy name that is not configured (an
// unknown one is user input too).
func TestMetricsNeverLabelKeys(t *testing.T) {
	e := newMemoryEnv(t)
	const (
		allowedKey = "user-secret-key-12345"
		deniedKey  = "denied-secret-key-67890"
		shadowKey  = "shadow-secret-key-24680"
		batchKey   = "batch-secret-key-13579"
		unknownKey = "unknown-policy-secret-key-11111"
		invalidKey = "invalid-secret-key-22222"
		unknownPol = "no-such-policy-secret-99999"
	)
	for _, c := range []struct {
		body   string
		status int
	}{
		{`{"policy":"per_user","key":"` + allowedKey + `"}`, 200},
		{`{"policy":"per_user","key":"` + deniedKey + `","cost":3}`, 200},
		{`{"policy":"per_user","key":"` + deniedKey + `"}`, 429},
		{`{"policy":"shadowed","key":"` + shadowKey + `"}`, 200},
		{`{"policy":"shadowed","key":"` + shadowKey + `"}`, 200}, // shadow_denied
		{`{"checks":[{"policy":"global","key":"` + batchKey + `"},{"policy":"per_user","key":"` + deniedKey + `"}]}`, 429},
		{`{"policy":"` + unknownPol + `","key":"` + unknownKey + `"}`, 404},
		{`{"checks":[{"policy":"global","key":"` + batchKey + `"},{"policy":"` + unknownPol + `","key":"` + unknownKey + `"}]}`, 404},
		{`{"policy":"per_user","key":"` + invalidKey + `","cost":-1}`, 400},
		{`{"policy":"bucket","key":"` + invalidKey + `","cost":11}`, 400},
	} {
		if resp, body := e.post("/v1/check", c.body); resp.StatusCode != c.status {
			t.Fatalf("%s: %d %+v, want %d", c.body, resp.StatusCode, body, c.status)
		}
	}

	exposition := e.get("/metrics")
	for _, want := range []string{
		`sluice_decisions_total{decision="allowed",policy="per_user"} 2`,
		`sluice_decisions_total{decision="denied",policy="per_user"} 2`,
		`sluice_decisions_total{decision="denied",policy="global"} 1`,
		`sluice_decisions_total{decision="shadow_denied",policy="shadowed"} 1`,
	} {
		if !strings.Contains(exposition, want) {
			t.Errorf("the metrics lack %s: the decisions were not counted", want)
		}
	}
	secrets := []string{allowedKey, deniedKey, shadowKey, batchKey, unknownKey, invalidKey, unknownPol, "secret"}
	for _, s := range secrets {
		if strings.Contains(exposition, s) {
			t.Errorf("/metrics contains %q", s)
		}
	}

	// The same, label by label: every policy label is a configured policy.
	families, err := e.svc.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var configured []string
	for _, p := range testPolicies {
		configured = append(configured, p.Name)
	}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "policy" && !slices.Contains(configured, l.GetValue()) {
					t.Errorf("%s has policy=%q, not a configured policy", mf.GetName(), l.GetValue())
				}
				for _, s := range secrets {
					if strings.Contains(l.GetValue(), s) {
						t.Errorf("%s has %s=%q", mf.GetName(), l.GetName(), l.GetValue())
					}
				}
			}
		}
	}
}
