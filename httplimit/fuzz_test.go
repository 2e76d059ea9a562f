package httplimit

import (
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/limitcore"
)

// FuzzClientIP feeds arbitrary peers and forwarding fields to ClientIP. The
// seed corpus is in testdata/fuzz/FuzzClientIP.
func FuzzClientIP(f *testing.F) {
	f.Add("10.0.0.1:1234", "198.51.100.1, 10.0.0.2", `for="[2001:db8::1]:80";proto=https`, "203.0.113.9")
	f.Add("[::ffff:10.0.0.1]:80", "::ffff:198.51.100.1", "for=unknown", "")
	trusted := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("2001:db8::/32"),
	}
	f.Fuzz(func(t *testing.T, remote, xff, forwarded, realIP string) {
		bare := &http.Request{RemoteAddr: remote, Header: http.Header{}}
		peer := ClientIP(bare, trusted)
		r := &http.Request{RemoteAddr: remote, Header: http.Header{}}
		r.Header.Set(HeaderXForwardedFor, xff)
		r.Header.Set(HeaderForwarded, forwarded)
		r.Header.Set(HeaderXRealIP, realIP)
		for _, order := range [][]string{
			{HeaderForwarded, HeaderXForwardedFor, HeaderXRealIP},
			{HeaderXRealIP},
			{HeaderXForwardedFor},
		} {
			got := ClientIP(r, trusted, order...)
			if got.IsValid() != peer.IsValid() {
				t.Fatalf("%v: %v for peer %v: an address without a peer, or none with one", order, got, peer)
			}
			if !got.IsValid() {
				continue
			}
			if got.Is4In6() || got.Zone() != "" {
				t.Fatalf("%v: %v: not normalised", order, got)
			}
			if !isTrusted(peer, trusted) && got != peer {
				t.Fatalf("%v: %v, want the untrusted peer %v: headers believed from anyone", order, got, peer)
			}
			// The answer is an address a peer could have: it reads back as itself.
			back := &http.Request{RemoteAddr: netip.AddrPortFrom(got, 1).String()}
			if again := ClientIP(back, nil); again != got {
				t.Fatalf("%v: %v does not read back (%v)", order, got, again)
			}
			if k := limitcore.IPKey(got, 64); k == "" {
				t.Fatalf("%v: empty key for %v", order, got)
			}
		}
	})
}

// FuzzFormatFields: whatever the policy name (arbitrary bytes) and numbers,
// the fields are valid Structured Field Lists holding the right values, and
// Retry-After is delay-seconds. The seed corpus is in
// testdata/fuzz/FuzzFormatFields.
func FuzzFormatFields(f *testing.F) {
	f.Add("api", int64(100), int64(60_000_000), int64(99), int64(600_000), int64(0))
	f.Add("we\"ird\\\x00\xff", int64(1<<53), int64(1), int64(-1), int64(-5), int64(1))
	f.Fuzz(func(t *testing.T, name string, limit, periodMicros, remaining, resetMicros, retryMicros int64) {
		p := sluice.Policy{Name: name, Limit: limit, Period: time.Duration(periodMicros) * time.Microsecond}
		other := sluice.Policy{Name: "other", Limit: 7, Period: time.Hour}
		quotas := []Quota{
			{Policy: &p, Result: sluice.Result{Remaining: remaining, ResetAfter: time.Duration(resetMicros) * time.Microsecond}},
			{Policy: &other, Result: sluice.Result{Remaining: 3, ResetAfter: time.Minute}},
		}
		h := http.Header{}
		retry := time.Duration(retryMicros) * time.Microsecond
		SetHeaders(h, quotas, retry)

		wantName := name
		for i := 0; i < len(name); i++ {
			if name[i] < 0x20 || name[i] > 0x7e {
				wantName = "" // replaced bytes: only check it parses
			}
		}
		check := func(field string, want map[string]int64) {
			list, err := httpsfv.UnmarshalList(h.Values(field))
			if err != nil || len(list) != 2 {
				t.Fatalf("%s: %q: %v, %d members", field, h.Values(field), err, len(list))
			}
			item, ok := list[0].(httpsfv.Item)
			if !ok {
				t.Fatalf("%s: %q: not an item", field, h.Values(field))
			}
			if s, ok := item.Value.(string); !ok || wantName != "" && s != wantName {
				t.Fatalf("%s: %q: name %v, want %q", field, h.Values(field), item.Value, wantName)
			}
			for k, v := range want {
				if got, _ := item.Params.Get(k); got != v {
					t.Fatalf("%s: %q: %s=%v, want %d", field, h.Values(field), k, got, v)
				}
			}
		}
		check(HeaderPolicy, map[string]int64{"q": sfInteger(limit), "w": max(1, Seconds(p.Period))})
		check(HeaderRateLimit, map[string]int64{"r": sfInteger(remaining), "t": Seconds(quotas[0].Result.ResetAfter)})

		ra := h.Values(HeaderRetryAfter)
		if retry <= 0 {
			if ra != nil {
				t.Fatalf("Retry-After %q for %v", ra, retry)
			}
			return
		}
		n, err := strconv.ParseInt(ra[0], 10, 64)
		if len(ra) != 1 || err != nil || n < 1 || n > maxSecondsInAHeader ||
			n < maxSecondsInAHeader && time.Duration(n)*time.Second < retry {
			t.Fatalf("Retry-After %q for %v", ra, retry)
		}
	})
}
