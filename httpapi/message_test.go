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
		`{"policy":"p","key":"k","cost":"1"}`:    `field "cost" must be a whole number, got JSON string`,
		`{"policy":"p","key":"k","cost":1.5}`:    `field "cost" must be a whole number, got JSON number 1.5`,
		`{"policy":3,"key":"k"}`:                 `field "policy" must be a string, got JSON number`,
		`{"policy":"p","key":true}`:              `field "key" must be a string, got JSON bool`,
		`{"checks":{}}`:                          `field "checks" must be a list, got JSON object`,
		`{"checks":[1]}`:                         `must be an object, got JSON number`,
		`{"checks":[{"policy":"p","cost":"x"}]}`: `must be a whole number, got JSON string`,
		`{"policy":"p","key":"k","cost":1e30}`:   `field "cost" must be a whole number, got JSON number 1e30`,
		`["policy"]`:                             `must be an object, got JSON array`,
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
