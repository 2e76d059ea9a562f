package httpapi_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/httpapi"
)

// The body of /v1/check is read strictly: exact field names, no field twice,
// no unknown field, text that is UTF-8 without lone surrogates; and the
// messages speak JSON, never Go.
func TestStrictDecoding(t *testing.T) {
	e := newMemoryEnv(t)
	cases := []struct{ body, message string }{
		{`{"Policy":"per_user","key":"a"}`, `unknown field "Policy": field names are case-sensitive; did you mean "policy"?`},
		{`{"policy":"per_user","KEY":"a"}`, `did you mean "key"?`},
		{`{"checks":[{"policy":"per_user","key":"a","Cost":1}]}`, `unknown field "checks[0].Cost"`},
		{`{"policy":"per_user","key":"a","extra":1}`, `unknown field "extra"`},
		{`{"policy":"global","policy":"per_user","key":"a"}`, `field "policy" is given twice`},
		{`{"policy":"per_user","key":"a","key":"b"}`, `field "key" is given twice`},
		{`{"policy":"per_user","key":"a","cost":null,"cost":2}`, `field "cost" is given twice`},
		{`{"checks":[{"policy":"global","key":"a","policy":"per_user"}]}`, `field "checks[0].policy" is given twice`},
		{`{"checks":[],"checks":[{"policy":"global","key":"a"}]}`, `field "checks" is given twice`},
		{`{"policy":"per_user","key":"a","cost":"1"}`, `cost must be an integer, not a string`},
		{`{"policy":"per_user","key":"a","cost":1.5}`, `cost must be an integer, not 1.5`},
		{`{"policy":"per_user","key":"a","cost":1e3}`, `cost must be an integer, not 1e3`},
		{`{"policy":"per_user","key":"a","cost":9223372036854775808}`, `cost must be an integer that fits in 64 bits`},
		{`{"policy":7,"key":"a"}`, `policy must be a string, not a number`},
		{`{"checks":[{"policy":"per_user","key":["a"]}]}`, `checks[0].key must be a string, not a list`},
		{`{"checks":{"policy":"per_user","key":"a"}}`, `checks must be a list of objects, not an object`},
		{`{"checks":[null]}`, `checks[0] must be a JSON object, not null`},
		{`[{"policy":"per_user","key":"a"}]`, `the body must be a JSON object, not a list`},
		{`{"policy":"per_user","key":"a"}]`, `the body must hold a single JSON object`},
		{"{\"policy\":\"per_user\",\"key\":\"\xff\"}", `not valid UTF-8 (byte 28)`},
		{"{\"policy\":\"per_user\",\"key\":\"a\xc3\x28\"}", `not valid UTF-8 (byte 29)`},
		{`{"policy":"per_user","key":"\ud800"}`, `\ud800 is half of a UTF-16 surrogate pair`},
		{`{"policy":"per_user","key":"\udfff"}`, `\udfff is half`},
		{`{"policy":"per_user","key":"\ud83d\u0041"}`, `\ud83d is half`},
		{`{"policy":"per_user","key":"x\ud83d"}`, `\ud83d is half`},
		{`{"checks":[{"policy":"per_user","key":"\\\udc00"}]}`, `\udc00 is half`},
	}
	for _, c := range cases {
		resp, body := e.post("/v1/check", c.body)
		if resp.StatusCode != 400 || body.Error == nil || body.Error.Code != "malformed_json" {
			t.Errorf("%s: %d %+v, want 400 malformed_json", c.body, resp.StatusCode, body.Error)
			continue
		}
		if !strings.Contains(body.Error.Message, c.message) {
			t.Errorf("%s: message %q, want it to say %q", c.body, body.Error.Message, c.message)
		}
		for _, goName := range []string{"int64", "checkJSON", "httpapi", "*", "struct"} {
			if strings.Contains(body.Error.Message, goName) {
				t.Errorf("%s: message %q shows Go's %q", c.body, body.Error.Message, goName)
			}
		}
	}
	// None of the refused bodies counted anywhere: U+FFFD's bucket, which a
	// lenient decoder would have charged for every bad key, is untouched; and
	// escapes that are characters are keys like any other.
	for _, c := range []struct{ body, key string }{
		{`{"policy":"per_user","key":"\ufffd"}`, "\ufffd"},
		{`{"policy":"per_user","key":"\ud83d\ude00","cost":null}`, "\U0001F600"},
		{`{"policy":"per_user","key":"\\ud800"}`, `\ud800`},
		{"{\"policy\":\"per_user\",\"key\":\"\u00e9\"}", "\u00e9"},
	} {
		resp, body := e.post("/v1/check", c.body)
		if resp.StatusCode != 200 || body.Checks[0].Key != c.key || body.Checks[0].Remaining != 2 {
			t.Errorf("%s: %d %+v, want key %q admitted first", c.body, resp.StatusCode, body, c.key)
		}
	}
}

// The admin API reads its body as strictly, and takes the Bearer scheme in
// any case (RFC 9110).
func TestAdminStrict(t *testing.T) {
	e := newMemoryEnv(t, httpapi.WithAdminToken("s3cret"))
	for _, c := range []struct{ body, message string }{
		{`{"Policy":"per_user","key":"a"}`, `did you mean "policy"?`},
		{`{"policy":"per_user","key":"a","key":"b"}`, `field "key" is given twice`},
		{"{\"policy\":\"per_user\",\"key\":\"\xff\"}", `not valid UTF-8`},
		{`{"policy":"per_user","key":"a"} {}`, `single JSON object`},
	} {
		resp, body := e.post("/v1/admin/reset", c.body, "Authorization", "Bearer s3cret")
		if resp.StatusCode != 400 || body.Error == nil || !strings.Contains(body.Error.Message, c.message) {
			t.Errorf("%s: %d %+v, want 400 saying %q", c.body, resp.StatusCode, body.Error, c.message)
		}
	}
	for _, auth := range []string{"Bearer s3cret", "bearer s3cret", "BEARER s3cret", "bEaReR s3cret"} {
		e.post("/v1/check", `{"policy":"per_user","key":"a","cost":3}`)
		if resp, _ := e.post("/v1/admin/reset", `{"policy":"per_user","key":"a"}`, "Authorization", auth); resp.StatusCode != 200 {
			t.Errorf("Authorization %q: %d, want 200", auth, resp.StatusCode)
		}
		if _, body := e.post("/v1/check", `{"policy":"per_user","key":"a","cost":0}`); body.Checks[0].Remaining != 3 {
			t.Errorf("Authorization %q: not reset: %+v", auth, body)
		}
	}
	for _, auth := range []string{"Bearers3cret", "Bearer  s3cret", "Bearer s3cre", "Bearer S3CRET", "Basic s3cret", "s3cret"} {
		if resp, _ := e.post("/v1/admin/reset", `{"policy":"per_user","key":"a"}`, "Authorization", auth); resp.StatusCode != 401 {
			t.Errorf("Authorization %q: %d, want 401", auth, resp.StatusCode)
		}
	}
}
