package limitcore

import (
	"net/http"
	"strconv"
	"testing"
)

func TestParseUsage(t *testing.T) {
	for _, tc := range []struct {
		h     http.Header
		n     int64
		found bool
		bad   bool
	}{
		{h: http.Header{}},
		{h: http.Header{"X-Used": {"0"}}, found: true},
		{h: http.Header{"X-Used": {"15"}}, n: 15, found: true},
		{h: http.Header{"X-Used": {"9223372036854775807"}}, n: 1<<63 - 1, found: true},
		{h: http.Header{http.TrailerPrefix + "X-Used": {"4"}}, n: 4, found: true},
		{h: http.Header{"X-Used": {"9223372036854775808"}}, found: true, bad: true},
		{h: http.Header{"X-Used": {"-1"}}, found: true, bad: true},
		{h: http.Header{"X-Used": {"+1"}}, found: true, bad: true},
		{h: http.Header{"X-Used": {" 1"}}, found: true, bad: true},
		{h: http.Header{"X-Used": {"1e3"}}, found: true, bad: true},
		{h: http.Header{"X-Used": {""}}, found: true, bad: true},
		{h: http.Header{"X-Used": {"1", "2"}}, found: true, bad: true},
	} {
		n, found, err := ParseUsage(tc.h, "X-Used")
		if n != tc.n || found != tc.found || (err != nil) != tc.bad {
			t.Errorf("%v: %d, %v, %v; want %d, %v, error %v", tc.h, n, found, err, tc.n, tc.found, tc.bad)
		}
	}
}

// FuzzParseUsage: a value is accepted exactly when it is the canonical
// decimal writing of a non-negative int64, or that with leading zeros.
func FuzzParseUsage(f *testing.F) {
	for _, s := range []string{"0", "15", "007", "-1", "+1", " 1", "1.5", "", "9223372036854775808", "١٢"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, found, err := ParseUsage(http.Header{"X-Used": {s}}, "X-Used")
		if !found {
			t.Fatal("a present header was not found")
		}
		want, werr := strconv.ParseUint(s, 10, 63)
		ok := werr == nil && s != "" && s[0] != '+'
		if (err == nil) != ok || err == nil && (n < 0 || uint64(n) != want) {
			t.Fatalf("%q: %d, %v; ParseUint says %d, %v", s, n, err, want, werr)
		}
	})
}
