package suggest

import (
	"testing"
	"unicode/utf8"
)

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"config", "config", 0},
		{"config", "confg", 1},
		{"", "store", 5},
		{"on_eror", "on_error", 1},
		{"http-addr", "grpc-addr", 4},
		{"kitten", "sitting", 3},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// FuzzDistance: the distance is symmetric, zero only for equal strings,
// at most the longer length, and at least the difference in lengths.
func FuzzDistance(f *testing.F) {
	f.Add("config", "confg")
	f.Add("", "store")
	f.Add("http-addr", "grpc-addr")
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(a) > 64 || len(b) > 64 || !utf8.ValidString(a) || !utf8.ValidString(b) {
			return
		}
		d := Distance(a, b)
		if d != Distance(b, a) || (d == 0) != (a == b) || d > max(len(a), len(b)) || d < max(len(a)-len(b), len(b)-len(a)) {
			t.Fatalf("Distance(%q, %q) = %d", a, b, d)
		}
	})
}
