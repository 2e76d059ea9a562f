package envoyrls

import (
	"fmt"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/sluicehq/sluice"
)

// Store keys.
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

// emptyKey is the key of the value list [""].
const emptyKey = `\`

// storeKey returns the store key of a descriptor's entries (at least one). It
// allocates at most once: not at all for the common single value that needs
// no escaping, which is used as is.
func storeKey(entries []*ratelimitv3.RateLimitDescriptor_Entry) (string, error) {
	if len(entries) == 1 {
		v := entries[0].GetValue()
		switch {
		case v == "":
			return emptyKey, nil
		case len(v) <= sluice.MaxKeyLen && !strings.ContainsAny(v, `|\`):
			return v, nil
		}
	}
	n := len(entries) - 1
	for _, e := range entries {
		n += escapedLen(e.GetValue())
	}
	if n > sluice.MaxKeyLen {
		return "", keyTooLong(n)
	}
	var b strings.Builder
	b.Grow(n)
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('|')
		}
		writeEscaped(&b, e.GetValue())
	}
	return b.String(), nil
}

// keyTooLong says how long a key is, never what it holds: keys are request
// data, and the message goes back to the client and possibly into logs.
func keyTooLong(n int) error {
	return fmt.Errorf("the store key would be %d bytes, longer than the maximum %d (%w)", n, sluice.MaxKeyLen, sluice.ErrInvalidKey)
}

// escapedLen is the length of v once escaped.
func escapedLen(v string) int {
	return len(v) + strings.Count(v, "|") + strings.Count(v, `\`)
}

func writeEscaped(b *strings.Builder, v string) {
	if !strings.ContainsAny(v, `|\`) {
		b.WriteString(v)
		return
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '|' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(v[i])
	}
}
