package memory

import (
	"strings"
	"testing"
	"unsafe"
)

// keyText holds any key, short or long, and finds exactly that key, also
// across the inline limit, for keys with zero bytes and for long keys that
// share a prefix.
func TestKeyTextMatchesStrings(t *testing.T) {
	inline := strings.Repeat("x", shortKeyLen)
	keys := []string{"", "a", "a\x00", "\x00", "\xff", inline[1:], inline, inline + "\xff", inline + "y",
		inline + "yz", inline + "zz", "user-12345", strings.Repeat("\xff", 40)}
	for _, a := range keys {
		for _, b := range keys {
			checkKeyText(t, a, b)
		}
	}
}

// FuzzKeyText checks keyText against plain string comparison.
func FuzzKeyText(f *testing.F) {
	f.Add("", "")
	f.Add("user-1", "user-1")
	f.Add("abcdefghijklmno", "abcdefghijklmnop")
	f.Add("abcdefghijklmnop-1", "abcdefghijklmnop-2")
	f.Add("a\x00", "a")
	f.Fuzz(checkKeyText)
}

func checkKeyText(t *testing.T, a, b string) {
	text := keyTextOf(a)
	if text.String() != a || text.len() != len(a) {
		t.Fatalf("%q held as %q, length %d", a, text.String(), text.len())
	}
	if got := text.is(b); got != (a == b) {
		t.Fatalf("%q held is %q: %v", a, b, got)
	}
	if len(a) > shortKeyLen && unsafe.StringData(text.long) == unsafe.StringData(a) {
		t.Fatalf("a long key %q is not copied", a)
	}
}
