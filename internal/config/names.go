package config

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
)

// hashLen is how many hex digits of SHA-256 end a shortened name: 64 bits,
// so distinct long names do not collide in practice.
const hashLen = 16

// name builds the policy name of an Envoy limit: the domain, then ".key" or
// ".key_value" for each level, as envoyproxy/ratelimit names its stats. The
// name is the policy's identity in the store, so it depends only on where the
// limit sits in the tree: editing the limit and reloading keeps its counters.
//
// Characters a policy name cannot hold become "_". A name longer than
// sluice.MaxNameLen keeps a prefix and ends with "." and a hash of the whole
// name, so that it stays unique and deterministic. The hash is chained over
// the name's parts (h = SHA-256(h_parent ‖ part)) rather than taken over the
// joined string, so that a deep tree costs time linear in its size.
type name struct {
	prefix string   // the sanitized name, cut after MaxNameLen+1 bytes
	length int      // the sanitized name's full length (one byte per rune)
	sum    [32]byte // the chained hash of the parts so far
}

// child returns the name extended by part, such as ".key_value".
func (n name) child(part string) name {
	c := name{prefix: n.prefix, length: n.length + utf8.RuneCountInString(part)}
	if room := sluice.MaxNameLen + 1 - len(n.prefix); room > 0 {
		head := part
		if len(head) > room*utf8.UTFMax {
			head = head[:room*utf8.UTFMax] // enough runes to fill the room
		}
		s := sanitize(head)
		c.prefix += s[:min(len(s), room)]
	}
	h := sha256.New()
	h.Write(n.sum[:])
	h.Write([]byte(part))
	h.Sum(c.sum[:0])
	return c
}

// String returns the policy name.
func (n name) String() string {
	if n.length <= sluice.MaxNameLen {
		return n.prefix
	}
	return n.prefix[:sluice.MaxNameLen-hashLen-1] + "." + hex.EncodeToString(n.sum[:])[:hashLen]
}

// sanitize replaces each rune a policy name cannot hold (and each byte of
// invalid UTF-8) by "_", so that the result has one byte per input rune.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("_-.:/", r) {
			return r
		}
		return '_'
	}, s)
}
