package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestRedisKey(t *testing.T) {
	p := &sluice.Policy{Name: "api/v1:read", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second}
	for _, c := range []struct{ key, want string }{
		{"alice", "sluice:{api/v1:read:alice}:gc"},
		{"a{b}", "sluice:{api/v1:read:a%7Bb%7D}:gc"},
		{"}{", "sluice:{api/v1:read:%7D%7B}:gc"},
		{"50%", "sluice:{api/v1:read:50%25}:gc"},
		{"%7B", "sluice:{api/v1:read:%257B}:gc"},
	} {
		if got := redisKey(DefaultPrefix, p, c.key); got != c.want {
			t.Errorf("redisKey(%q) = %q, want %q", c.key, got, c.want)
		}
	}
	// Escaping is injective and the hash tag is always the whole (policy, key).
	keys := []string{"a{b}", "a%7Bb%7D", "{}", "}{", "%", "%25", "a:b", "a\x00b", "ключ", strings.Repeat("}", 1024)}
	seen := map[string]string{}
	for _, k := range keys {
		rk := redisKey("x:", p, k)
		if other, dup := seen[rk]; dup {
			t.Errorf("keys %q and %q share the Redis key %q", k, other, rk)
		}
		seen[rk] = k
		open := strings.IndexByte(rk, '{')
		end := open + 1 + strings.IndexByte(rk[open+1:], '}')
		if tag := rk[open+1 : end]; !strings.HasPrefix(tag, p.Name+":") || rk[end:] != "}:gc" {
			t.Errorf("key %q: Redis key %q has hash tag %q", k, rk, tag)
		}
	}
	// Each algorithm has its own suffix, so a policy that changes algorithm
	// starts fresh.
	codes := map[string]bool{}
	for _, a := range sluice.Algorithms {
		codes[algoCode(a)] = true
	}
	if len(codes) != len(sluice.Algorithms) {
		t.Errorf("algorithm codes collide: %v", codes)
	}
}

func TestSlot(t *testing.T) {
	for _, c := range []struct {
		key  string
		want int
	}{
		{"123456789", 0x31C3}, // the CRC16/XMODEM check value
		{"foo", 12182},
		{"bar", 5061},
		{"{user1000}.following", Slot("user1000")},
		{"{}user1000", Slot("{}user1000")},
		{"a{}b{c}", Slot("a{}b{c}")},
	} {
		if got := Slot(c.key); got != c.want {
			t.Errorf("Slot(%q) = %d, want %d", c.key, got, c.want)
		}
	}
	if Slot("{}x") == Slot("x") && Slot("{}y") == Slot("y") {
		t.Error("an empty hash tag must hash the whole key")
	}
}

func TestFormatInts(t *testing.T) {
	vals := []int64{0, -1, 1 << 53, 4102444800000000, 7}
	got := make([]string, len(vals))
	formatInts(got, vals)
	want := []string{"0", "-1", "9007199254740992", "4102444800000000", "7"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("formatInts = %q, want %q", got, want)
		}
	}
}
