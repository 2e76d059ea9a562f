package redisstore

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice"
)

// algoCode is the suffix of an algorithm's keys, and the name the batch script
// dispatches on. It sits outside the hash tag, so a policy that changes
// algorithm keeps its slot but starts from a fresh state, as in the memory
// store.
func algoCode(a sluice.Algorithm) string {
	switch a {
	case sluice.FixedWindow:
		return "fw"
	case sluice.SlidingWindow:
		return "sw"
	case sluice.SlidingLog:
		return "sl"
	case sluice.TokenBucket:
		return "tb"
	case sluice.LeakyBucket:
		return "lb"
	case sluice.Concurrency:
		return "cc"
	case sluice.GCRA:
		return "gc"
	}
	// Stores assume valid policies (sluice.Store). Every request's key is
	// built here first, so this refuses to pick an algorithm for one that is
	// not before anything is sent or queued.
	panic(unknownAlgorithm(a))
}

// unknownAlgorithm is the panic of a request whose algorithm is none of
// Sluice's.
func unknownAlgorithm(a sluice.Algorithm) string {
	return fmt.Sprintf("redisstore: policy has unknown algorithm %q: validate policies with Policy.Validate (sluice.New does)", string(a))
}

// redisKey returns prefix + "{" + policy + ":" + escaped key + "}:" + code.
// The braces make (policy, key) the hash tag, so on a Cluster one key's state
// never moves between slots while another key's may live elsewhere. Escaping
// '%', '{' and '}' in the user's key (as %25, %7B, %7D) keeps it from closing
// the tag early or from colliding with another key; policy names cannot hold
// those characters. It allocates once.
func redisKey(prefix string, p *sluice.Policy, key string) string {
	// Built on the stack, then copied once into a string of the right size.
	var buf [128]byte
	b := buf[:0]
	keyRef{prefix: prefix, p: p, key: key}.pieces(func(s string) { b = append(b, s...) })
	return string(b)
}

// keyRef is a Redis key, either built (full) or as the parts redisKey builds
// it from (p set), so that where a key lives (its slot, its shard) can be
// found from a request without building the key a second time.
type keyRef struct {
	full   string
	prefix string
	p      *sluice.Policy
	key    string
}

// builtKey refers to a Redis key already built.
func builtKey(key string) keyRef { return keyRef{full: key} }

// pieces calls yield with the key's bytes in order, in pieces: the one
// definition of a Redis key's layout.
func (k keyRef) pieces(yield func(string)) {
	if k.p == nil {
		yield(k.full)
		return
	}
	yield(k.prefix)
	yield("{")
	yield(k.p.Name)
	yield(":")
	start := 0
	for i := 0; i < len(k.key); i++ {
		var esc string
		switch k.key[i] {
		case '%':
			esc = "%25"
		case '{':
			esc = "%7B"
		case '}':
			esc = "%7D"
		default:
			continue
		}
		yield(k.key[start:i])
		yield(esc)
		start = i + 1
	}
	yield(k.key[start:])
	yield("}:")
	yield(algoCode(k.p.Algorithm))
}

// slot returns the key's Redis Cluster hash slot (see Slot): its hash tag's
// CRC16, found in one pass over the pieces, or when the tag is empty or
// never closed, the whole key's in a second.
func (k keyRef) slot() int {
	var t tagHash
	k.pieces(t.write)
	if t.state == afterTag && t.tagLen > 0 {
		return int(t.crc & 16383)
	}
	var crc uint16
	k.pieces(func(s string) { crc = crc16(crc, s) })
	return int(crc & 16383)
}

// hash returns FNV-1a of the key, which places it on a shard.
func (k keyRef) hash() uint64 {
	h := uint64(fnvOffset)
	k.pieces(func(s string) { h = fnvAdd(h, s) })
	return h
}

// Slot returns the Redis Cluster hash slot of key (0 to 16383): CRC16 of its
// hash tag, the part between the first '{' and the next '}' when that part is
// not empty, else of the whole key — as Redis computes it. Runners use it to
// tell whether one script may touch several keys.
func Slot(key string) int { return builtKey(key).slot() }

// tagHash finds a key's hash tag, the bytes between its first '{' and the
// next '}', given the key in pieces, and computes the tag's CRC16.
type tagHash struct {
	crc    uint16
	state  uint8 // before the first '{', in the tag, or after it
	tagLen int
}

const (
	beforeTag = iota
	inTag
	afterTag
)

func (t *tagHash) write(s string) {
	switch t.state {
	case beforeTag:
		i := strings.IndexByte(s, '{')
		if i < 0 {
			return
		}
		t.state, s = inTag, s[i+1:]
		fallthrough
	case inTag:
		j := strings.IndexByte(s, '}')
		if j < 0 {
			t.crc, t.tagLen = crc16(t.crc, s), t.tagLen+len(s)
			return
		}
		t.crc, t.tagLen, t.state = crc16(t.crc, s[:j]), t.tagLen+j, afterTag
	}
}

// crc16 continues crc over s.
func crc16(crc uint16, s string) uint16 {
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crc16tab[byte(crc>>8)^s[i]]
	}
	return crc
}

// crc16tab is CRC16-CCITT (XModem, polynomial 0x1021), the checksum Redis
// Cluster uses.
var crc16tab = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
