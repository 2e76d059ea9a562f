package limitcore

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strings"

	"github.com/sluicehq/sluice"
)

// Join combines several keys into one: a request is counted per distinct
// combination. The parts are joined unambiguously ('\' and '|' in a part are
// escaped, so '|' only ever separates parts), and a request that lacks any
// part has no key. Join returns nil if any part is nil, so that the zero Key
// is still reported as such.
func Join[R any](parts ...KeyFunc[R]) KeyFunc[R] {
	for _, k := range parts {
		if k == nil {
			return nil
		}
	}
	return func(r R) (string, error) {
		var b strings.Builder
		for i, k := range parts {
			part, err := k(r)
			if err != nil || part == "" {
				return "", err
			}
			if i > 0 {
				b.WriteByte('|')
			}
			writeEscaped(&b, part)
		}
		return b.String(), nil
	}
}

// StoreKey returns the store key of r under a limit keyed by key, with
// fallback keying the requests key has none for (nil: none); "" when the
// limit does not apply to r. The two key spaces are kept apart, and a key
// too long for a store is hashed (FitKey). An error is a *KeyError.
func StoreKey[R any](key, fallback KeyFunc[R], r R) (string, error) {
	k, err := key(r)
	if err != nil {
		return "", &KeyError{"key", err}
	}
	if fallback == nil {
		return FitKey(k), nil
	}
	// Distinct prefixes keep the two key spaces apart.
	if k != "" {
		return FitKey("key:" + k), nil
	}
	if k, err = fallback(r); err != nil {
		return "", &KeyError{"fallback key", err}
	}
	if k == "" {
		return "", nil
	}
	return FitKey("fallback:" + k), nil
}

// KeyError is a key function's failure, saying which function failed.
type KeyError struct {
	Which string // "key" or "fallback key"
	Err   error
}

func (e *KeyError) Error() string { return e.Which + ": " + e.Err.Error() }
func (e *KeyError) Unwrap() error { return e.Err }

// writeEscaped writes s with '\' and '|' escaped by a backslash. It works on
// bytes, so a part that is not valid UTF-8 keeps its bytes and stays distinct.
func writeEscaped(b *strings.Builder, s string) {
	if !strings.ContainsAny(s, `\|`) {
		b.WriteString(s)
		return
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] == '|' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
}

// FitKey makes any key acceptable to a store: one longer than
// sluice.MaxKeyLen (a huge header value) is replaced by its SHA-256, so it is
// still counted on its own instead of failing the request.
func FitKey(k string) string {
	if len(k) <= sluice.MaxKeyLen {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// IPKey is the rate-limit key of a client address, unmapped and without a
// zone: IPv4 addresses as they are, IPv6 addresses grouped by their first
// v6Bits bits, because one subscriber is usually given a whole /64 (or more)
// and could otherwise rotate through it.
func IPKey(a netip.Addr, v6Bits int) string {
	if a.Is4() || v6Bits >= 128 {
		return a.String()
	}
	p, _ := a.Prefix(v6Bits)
	return p.String()
}
