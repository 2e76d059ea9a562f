package redisstore

import (
	"hash/fnv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// slotReference is Redis' keyHashSlot written out directly on a built key,
// the yardstick for the slot found from a key's parts.
func slotReference(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crc16tab[byte(crc>>8)^key[i]]
	}
	return int(crc & 16383)
}

func fnvReference(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// checkKeyRef checks that the slot and shard hash of (prefix, p, key) are
// those of the Redis key built from them.
func checkKeyRef(t *testing.T, prefix string, p *sluice.Policy, key string) {
	t.Helper()
	rk := redisKey(prefix, p, key)
	k := keyRef{prefix: prefix, p: p, key: key}
	if got, want := k.slot(), slotReference(rk); got != want {
		t.Errorf("slot of (%q, %q, %q) = %d, want %d (of %q)", prefix, p.Name, key, got, want, rk)
	}
	if got, want := Slot(rk), slotReference(rk); got != want {
		t.Errorf("Slot(%q) = %d, want %d", rk, got, want)
	}
	if got, want := k.hash(), fnvReference(rk); got != want {
		t.Errorf("hash of (%q, %q, %q) = %x, want %x (of %q)", prefix, p.Name, key, got, want, rk)
	}
}

func TestKeyRefPlacesLikeTheBuiltKey(t *testing.T) {
	// Prefixes with braces of their own move the hash tag: into the prefix,
	// across the prefix and the policy, or (an empty tag) to the whole key.
	prefixes := []string{"", "sluice:", DefaultPrefix, "a{b}:", "{}", "a{", "x}{", "{a", "}", "{{", "a{}{b}", "p{q:"}
	policies := []*sluice.Policy{
		{Name: "api", Algorithm: sluice.GCRA},
		{Name: "api/v1:read", Algorithm: sluice.TokenBucket},
		{Name: "x", Algorithm: sluice.SlidingLog},
	}
	keys := []string{"", "alice", "a{b}", "{}", "}{", "%", "%7B", "50%", "{", "}", "a:b", "ключ", strings.Repeat("}{", 40)}
	for _, prefix := range prefixes {
		for _, p := range policies {
			for _, key := range keys {
				checkKeyRef(t, prefix, p, key)
			}
		}
	}
	for _, s := range []string{"", "{", "}", "{}", "{}x", "a{b", "a{b}c{d}", "{{}}", "123456789"} {
		if got, want := Slot(s), slotReference(s); got != want {
			t.Errorf("Slot(%q) = %d, want %d", s, got, want)
		}
	}
}

func FuzzKeyRef(f *testing.F) {
	f.Add("sluice:", "api", "alice", uint8(0))
	f.Add("a{b}", "api/v1:read", "{x}", uint8(3))
	f.Add("{", "p", "}%{", uint8(5))
	f.Add("{}", "q", "", uint8(1))
	f.Add("x}{", "r", "%7D", uint8(2))
	f.Fuzz(func(t *testing.T, prefix, name, key string, algo uint8) {
		p := &sluice.Policy{Name: name, Algorithm: sluice.Algorithms[int(algo)%len(sluice.Algorithms)]}
		checkKeyRef(t, prefix, p, key)
		if got, want := Slot(key), slotReference(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	})
}

// Naming a request's node builds no Redis key: a decision on a Cluster or on
// shards allocates no more than on one server.
func TestNodeOfAllocatesNothing(t *testing.T) {
	p := &sluice.Policy{Name: "api", Algorithm: sluice.GCRA, Limit: 100, Period: time.Second}
	for name, s := range nodeOfStores(t) {
		if s.NodeOf(p, "user:{12345}") == "" {
			t.Fatalf("%s: no node", name)
		}
		if n := testing.AllocsPerRun(100, func() { s.NodeOf(p, "user:{12345}") }); n != 0 {
			t.Errorf("%s: NodeOf allocates %.0f times", name, n)
		}
		if n := testing.AllocsPerRun(100, func() { s.ShardOf(p, "user:{12345}") }); n != 0 {
			t.Errorf("%s: ShardOf allocates %.0f times", name, n)
		}
	}
}
