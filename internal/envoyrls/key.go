package envoyrls

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// Store keys.
//
// share_threshold: the values of entries whose node shares its threshold
// are replaced by the node's glob before the key is made (see
// config.MatchShared), so every value the glob matches has one counter.
//
// A limit's state is identified by (policy name, key). The policy fixes the
// path through the domain tree, hence the entry keys, but not the values: a
// default node ("key with no value") or a wildcard matches many values, and
// each value must get its own counter. So the store key is the entry values,
// in order, joined with '|'. A '|' or '\' inside a value is escaped with a
// backslash, so two different value lists never make the same key:
// ["a|b"] is `a\|b`, ["a", "b"] is `a|b`.
//
// A single empty value would make an empty key, which stores refuse; it is
// written as a lone backslash, which escaping never produces (an escaped
// value's backslashes always come in pairs or before a '|').
//
// A key longer than sluice.MaxKeyLen (a long header value, or a hostile one)
// is not refused, which an Envoy failing open would let through, but
// replaced by `\#` and the hex SHA-256 of the whole key. Escaping never
// produces `\#` either, so a hashed key is distinct from every plain one,
// and two long keys share a counter only if SHA-256 collides.

// emptyKey is the key of the value list [""].
const emptyKey = `\`

// hashedPrefix starts a hashed key.
const hashedPrefix = `\#`

// storeKey returns the store key of a descriptor's entries (at least one). It
// allocates at most once: not at all for the common single value that needs
// no escaping, which is used as is.
func storeKey(entries []config.Entry) string {
	if len(entries) == 1 {
		v := entries[0].Value
		switch {
		case v == "":
			return emptyKey
		case len(v) <= sluice.MaxKeyLen && !strings.ContainsAny(v, `|\`):
			return v
		}
	}
	n := len(entries) - 1
	for _, e := range entries {
		n += escapedLen(e.Value)
	}
	var b strings.Builder
	b.Grow(n)
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('|')
		}
		writeEscaped(&b, e.Value)
	}
	return hashIfLong(b.String())
}

// hashIfLong returns key, or its hashed form when it is too long to store.
func hashIfLong(key string) string {
	if len(key) <= sluice.MaxKeyLen {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return hashedPrefix + hex.EncodeToString(sum[:])
}

// escapedLen is the length of v once escaped.
func escapedLen(v string) int {
	return len(v) + strings.Count(v, "|") + strings.Count(v, `\`)
}

func writeEscaped(b *strings.Builder, v string) {
	for {
		i := strings.IndexAny(v, `|\`)
		if i < 0 {
			b.WriteString(v)
			return
		}
		b.WriteString(v[:i])
		b.WriteByte('\\')
		b.WriteByte(v[i])
		v = v[i+1:]
	}
}

// StoreKey is the store key of a descriptor's entries (at least one), as
// ShouldRateLimit keys its checks: the rate limit quota service (package
// rlqs) keys a bucket the same way, so that one descriptor names one bucket
// under both protocols.
func StoreKey(entries []config.Entry) string { return storeKey(entries) }
