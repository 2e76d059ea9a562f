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

// FuzzDecodeCheckRequest: no body makes the decoder panic, and every body it
// accepts yields between 1 and maxChecks checks of policies that exist;
// every refusal is a 4xx with a code and a message that shows no Go type.
// An accepted body is valid UTF-8, and encoding/json (which is laxer: it
// folds case, keeps the last of two fields and replaces bad text by U+FFFD)
// reads the same checks from it: strictness only ever refuses, it never
// reads a body differently.
func FuzzDecodeCheckRequest(f *testing.F) {
	for _, seed := range []string{
		`{"policy":"p","key":"alice"}`,
		`{"policy":"p","key":"alice","cost":0}`,
		`{"checks":[{"policy":"p","key":"a"},{"policy":"q","key":"b","cost":3}]}`,
		`{"checks":[]}`, `{"policy":"nope","key":"a"}`, `{"policy":"p","key":"a"} x`,
		`{"policy":"p","key":"a","cost":1e99}`, `[]`, `null`, `{"checks":null}`, ``,
		`{"Policy":"p","key":"a"}`, `{"checks":[{"policy":"p","key":"a","key":"b"}]}`,
		`{"policy":"p","key":"\ud83d"}`, `{"policy":"p","key":"\\\ud83d\ude00"}`, `{"policy":"p","key":"\\ud800"}`,
		`{"policy":"p","key":"a","cost":null}`, `{"policy":"p","key":"\u00e9\ufffd"}`,
		`{"policy":"p","key":"a","plan":"pro"}`, `{"checks":[{"policy":"p","key":"a","plan":"free","plan":"pro"}]}`,
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
			for _, goName := range []string{"int64", "checkJSON", "checkRequest", "httpapi."} {
				if strings.Contains(apiErr.Message, goName) {
					t.Fatalf("message %q shows Go's %s", apiErr.Message, goName)
				}
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
		if !utf8.Valid(body) {
			t.Fatalf("accepted a body that is not UTF-8: %q", body)
		}
		lax := laxChecks(t, body)
		if len(lax) != len(checks) {
			t.Fatalf("%d checks, encoding/json reads %d", len(checks), len(lax))
		}
		for i, c := range checks {
			l, cost := lax[i], int64(1)
			if l.Cost != nil {
				cost = *l.Cost
			}
			if l.Policy != c.Policy.Name || l.Key != c.Key || cost != c.Cost {
				t.Fatalf("check %d: %+v, encoding/json reads %+v", i, c, l)
			}
		}
	})
}

type laxCheck struct {
	Policy string `json:"policy"`
	Key    string `json:"key"`
	Cost   *int64 `json:"cost"`
}

// laxChecks reads the checks of body as encoding/json does.
func laxChecks(t *testing.T, body []byte) []laxCheck {
	var req struct {
		laxCheck
		Checks []laxCheck `json:"checks"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("accepted %q, which encoding/json refuses: %v", body, err)
	}
	if req.Checks != nil {
		return req.Checks
	}
	return []laxCheck{req.laxCheck}
}

// FuzzDecodeReleaseRequest: no body makes the release decoder panic; every
// body it accepts names a concurrency policy that exists, a key a store
// accepts and a token no longer than a store gives; every refusal is a 4xx
// with a code and a message.
func FuzzDecodeReleaseRequest(f *testing.F) {
	for _, seed := range []string{
		`{"policy":"c","key":"alice","release_token":"0123456789abcdef0123456789abcdef"}`,
		`{"policy":"c","key":"alice","release_token":"local:0123456789abcdef0123456789abcdef"}`,
		`{"policy":"c","key":"alice","release_token":"local:0123456789abcdef0123456789abcdef0"}`,
		`{"policy":"p","key":"alice","release_token":"ab"}`, `{"policy":"c","key":"","release_token":"ab"}`,
		`{"policy":"c","key":"a","release_token":"AB"}`, `{"policy":"c","key":"a","plan":"pro","release_token":"ab"}`,
		`{"policy":"c","key":"a","release_token":"ab","release_token":"cd"}`, `{"policy":"c","key":"a","release_token":null}`,
		`[]`, `null`, ``, `{"policy":"c","key":"\ud83d","release_token":"ab"}`,
	} {
		f.Add([]byte(seed))
	}
	cfg := &config.Config{Policies: map[string]*config.Policy{
		"p": {Policy: sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 5, Period: time.Second}},
		"c": {Policy: sluice.Policy{Name: "c", Algorithm: sluice.Concurrency, Limit: 5, Period: time.Second}},
	}}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, p, status, apiErr := decodeReleaseRequest(body, cfg)
		if apiErr != nil {
			if status < 400 || status > 499 || apiErr.Code == "" || apiErr.Message == "" || req != nil || p != nil {
				t.Fatalf("refusal %d %+v", status, apiErr)
			}
			return
		}
		if p == nil || cfg.Policies[req.Policy] != p || p.Algorithm != sluice.Concurrency {
			t.Fatalf("accepted policy %q", req.Policy)
		}
		if req.Key == "" || len(req.Key) > sluice.MaxKeyLen || req.ReleaseToken == "" || len(req.ReleaseToken) > 38 || !utf8.ValidString(req.Key) {
			t.Fatalf("accepted %+v", req)
		}
	})
}
