package httpapi

import (
	"regexp"
	"strings"
	"testing"
)

// goTypeName matches Go's own words for types, which a client's message
// must not show.
var goTypeName = regexp.MustCompile(`\b(u?int(8|16|32|64)?|float(32|64)|checkJSON|checkRequest|struct|httpapi)\b|\[\]|map\[|\*`)

// TestDecodeErrorsSpeakJSON: a body of the wrong JSON type is refused with a
// message in JSON's words — the field's JSON path and the JSON type wanted —
// never Go's type names.
func TestDecodeErrorsSpeakJSON(t *testing.T) {
	for body, want := range map[string]string{
		`{"policy":"p","key":"k","cost":"1"}`:    `cost must be an integer, not a string`,
		`{"policy":"p","key":"k","cost":1.5}`:    `cost must be an integer, not 1.5`,
		`{"policy":3,"key":"k"}`:                 `policy must be a string, not a number`,
		`{"policy":"p","key":true}`:              `key must be a string, not`,
		`{"checks":{}}`:                          `checks must be a list of objects, not an object`,
		`{"checks":[1]}`:                         `checks[0] must be a JSON object, not a number`,
		`{"checks":[{"policy":"p","cost":"x"}]}`: `checks[0].cost must be an integer, not a string`,
		`{"policy":"p","key":"k","cost":1e30}`:   `cost must be an integer`,
		`["policy"]`:                             `the body must be a JSON object, not a list`,
	} {
		_, status, apiErr := decodeCheckRequest([]byte(body), nil, 10)
		if apiErr == nil || status != 400 {
			t.Errorf("%s: status %d, error %+v", body, status, apiErr)
			continue
		}
		if !strings.Contains(apiErr.Message, want) {
			t.Errorf("%s: message %q, want it to contain %q", body, apiErr.Message, want)
		}
		if m := goTypeName.FindString(apiErr.Message); m != "" {
			t.Errorf("%s: message %q shows a Go type name %q", body, apiErr.Message, m)
		}
	}
}
