package redisstore

import (
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
	default:
		return "gc"
	}
}

// redisKey returns prefix + "{" + policy + ":" + escaped key + "}:" + code.
// The braces make (policy, key) the hash tag, so on a Cluster one key's state
// never moves between slots while another key's may live elsewhere. Escaping
// '%', '{' and '}' in the user's key (as %25, %7B, %7D) keeps it from closing
// the tag early or from colliding with another key; policy names cannot hold
// those characters. It allocates once.
func redisKey(prefix string, p *sluice.Policy, key string) string {
	special := 0
	for i := 0; i < len(key); i++ {
		if c := key[i]; c == '%' || c == '{' || c == '}' {
			special++
		}
	}
	var b strings.Builder
	b.Grow(len(prefix) + len(p.Name) + len(key) + 2*special + 6)
	b.WriteString(prefix)
	b.WriteByte('{')
	b.WriteString(p.Name)
	b.WriteByte(':')
	if special == 0 {
		b.WriteString(key)
	} else {
		for i := 0; i < len(key); i++ {
			switch c := key[i]; c {
			case '%':
				b.WriteString("%25")
			case '{':
				b.WriteString("%7B")
			case '}':
				b.WriteString("%7D")
			default:
				b.WriteByte(c)
			}
		}
	}
	b.WriteString("}:")
	b.WriteString(algoCode(p.Algorithm))
	return b.String()
}

// Slot returns the Redis Cluster hash slot of key (0 to 16383): CRC16 of its
// hash tag, the part between the first '{' and the next '}' when that part is
// not empty, else of the whole key — as Redis computes it. Runners use it to
// tell whether one script may touch several keys.
func Slot(key string) int {
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
