package overrides

import (
	"testing"
	"time"
)

func TestEntryRoundTrip(t *testing.T) {
	for _, o := range []Override{
		{Policy: "api", Key: "acme:1", Limit: 5, Period: time.Minute, Reason: "launch", UpdatedAt: t0},
		{Policy: "a.b-c/d:e", Prefix: "a b:c", Limit: 1 << 40, Period: time.Millisecond, Burst: 7,
			ExpiresAt: t0.Add(time.Hour), UpdatedAt: t0},
		{Policy: "api", Key: "far", Limit: 1, Period: time.Hour, ExpiresAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		field, value := fieldOf(o.Policy, o.Target()), encodeValue(&o)
		got, ok := decodeEntry(field, value)
		if !ok || !sameOverride(got, o) {
			t.Errorf("decodeEntry(%q, %q) = %+v, %v; want %+v", field, value, got, ok, o)
		}
	}
	for _, bad := range [][2]string{
		{"api", neverExpires + `{}`},                            // no target
		{" k:a", neverExpires + `{}`},                           // no policy
		{"api x:a", neverExpires + `{}`},                        // an unknown kind of target
		{"api k:", neverExpires + `{}`},                         // an empty key
		{"api k:a", "123"},                                      // too short for an expiry
		{"api k:a", "0000000000000000000x{}"},                   // not a time
		{"api k:a", "00000000000000000000{}"},                   // no time at all
		{"api k:a", neverExpires + `{"limit":"many"}`},          // not this JSON
		{"api k:a", neverExpires + `{"limit":1,"period_us"`},    // cut short
		{"api k:a", neverExpires + `{"limit":1,"period_us":0}`}, // no period
	} {
		if o, ok := decodeEntry(bad[0], bad[1]); ok {
			t.Errorf("decodeEntry(%q, %q) = %+v, want it refused", bad[0], bad[1], o)
		}
	}
}

// sameOverride compares two overrides to the microsecond, as they are kept.
func sameOverride(a, b Override) bool {
	return a.Policy == b.Policy && a.Key == b.Key && a.Prefix == b.Prefix && a.Limit == b.Limit &&
		a.Period == b.Period && a.Burst == b.Burst && a.Reason == b.Reason &&
		a.ExpiresAt.UnixMicro() == b.ExpiresAt.UnixMicro() && a.ExpiresAt.IsZero() == b.ExpiresAt.IsZero() &&
		a.UpdatedAt.UnixMicro() == b.UpdatedAt.UnixMicro()
}

// FuzzDecodeEntry: whatever a hash field and value hold, decoding either
// refuses them or gives an override that is kept as the same field and
// decodes from its own value to itself.
func FuzzDecodeEntry(f *testing.F) {
	o := Override{Policy: "api", Prefix: "acme:", Limit: 5, Period: time.Second, Burst: 2, ExpiresAt: t0, Reason: "r", UpdatedAt: t0}
	f.Add(fieldOf(o.Policy, o.Target()), encodeValue(&o))
	f.Add("api k:x", neverExpires+`{"limit":1,"period_us":1000000,"updated_us":0}`)
	f.Add("api k:x", "00000000000000000001null")
	f.Add("p p:", "")
	f.Fuzz(func(t *testing.T, field, value string) {
		o, ok := decodeEntry(field, value)
		if !ok {
			return
		}
		if got := fieldOf(o.Policy, o.Target()); got != field {
			t.Fatalf("decodeEntry(%q) names %q", field, got)
		}
		again, ok := decodeEntry(field, encodeValue(&o))
		if !ok || !sameOverride(again, o) {
			t.Fatalf("%+v re-encoded decodes to %+v, %v", o, again, ok)
		}
	})
}
