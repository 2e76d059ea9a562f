package httplimit

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// Quota is one limit's part of a response's rate-limit header fields: the
// policy that was applied (Policy) and the Result it gave (Result). It is
// sluice.Quota, which other front ends (grpclimit) describe decisions with
// too.
type Quota = sluice.Quota

// Header field names of draft-ietf-httpapi-ratelimit-headers and the legacy
// X-RateLimit-* convention.
const (
	HeaderPolicy         = "RateLimit-Policy"
	HeaderRateLimit      = "RateLimit"
	HeaderRetryAfter     = "Retry-After"
	HeaderLegacyLimit    = "X-RateLimit-Limit"
	HeaderLegacyRemain   = "X-RateLimit-Remaining"
	HeaderLegacyReset    = "X-RateLimit-Reset"
	maxSecondsInAHeader  = 1<<31 - 1 // keep integers small enough for any client
	structuredStringQuot = '"'
	// maxSFInteger is the largest Structured Field integer (RFC 9651 §3.3.1:
	// at most 15 digits). A policy's Limit may be larger (up to 2^53), and a
	// longer number would make the whole field unparseable.
	maxSFInteger = 999_999_999_999_999
)

// Seconds rounds d up to whole seconds, as delay-seconds fields need: a client
// that waits the advertised time must never come back early.
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64((d + time.Second - 1) / time.Second)
	return min(s, maxSecondsInAHeader)
}

// windowSeconds is the policy's window for the "w" parameter: its period,
// rounded up to at least one second (the field has no finer unit).
func windowSeconds(p *sluice.Policy) int64 { return max(1, Seconds(p.Period)) }

// sfInteger clamps n into the range a Structured Field integer can carry
// (negative counts are never meaningful here).
func sfInteger(n int64) int64 { return min(max(n, 0), maxSFInteger) }

// FormatPolicy returns the RateLimit-Policy field for quotas: one list member
// per quota, `"name";q=LIMIT;w=WINDOW_SECONDS`.
func FormatPolicy(quotas []Quota) string {
	var b strings.Builder
	b.Grow(fieldLen(quotas))
	for i, q := range quotas {
		if i > 0 {
			b.WriteString(", ")
		}
		appendPolicy(&b, q.Policy)
	}
	return b.String()
}

// fieldLen is about the length of a field listing quotas: their names and
// two integers each, so that a field is written in one allocation.
func fieldLen(quotas []Quota) int {
	n := 0
	for _, q := range quotas {
		n += len(q.Policy.Name) + 32
	}
	return n
}

// appendPolicy writes one RateLimit-Policy list member.
func appendPolicy(b *strings.Builder, p *sluice.Policy) {
	appendString(b, p.Name)
	b.WriteString(";q=")
	appendInt(b, sfInteger(p.Limit))
	b.WriteString(";w=")
	appendInt(b, windowSeconds(p))
}

// appendInt writes n in decimal without allocating a string for it.
func appendInt(b *strings.Builder, n int64) {
	var buf [20]byte
	b.Write(strconv.AppendInt(buf[:0], n, 10))
}

// FormatRateLimit returns the RateLimit field for quotas: one list member per
// quota, `"name";r=REMAINING;t=SECONDS_UNTIL_RESET`, where t is ResetAfter
// rounded up.
func FormatRateLimit(quotas []Quota) string {
	var b strings.Builder
	b.Grow(fieldLen(quotas))
	for i, q := range quotas {
		if i > 0 {
			b.WriteString(", ")
		}
		appendString(&b, q.Policy.Name)
		b.WriteString(";r=")
		appendInt(&b, sfInteger(q.Result.Remaining))
		b.WriteString(";t=")
		appendInt(&b, Seconds(q.Result.ResetAfter))
	}
	return b.String()
}

// appendString writes s as a Structured Field sf-string. Policy names only
// hold characters that need no escaping, but a quote or backslash is escaped
// anyway so the field stays parseable whatever it is given; other bytes
// outside printable ASCII are replaced, as sf-strings cannot carry them.
func appendString(b *strings.Builder, s string) {
	b.WriteByte(structuredStringQuot)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte(structuredStringQuot)
}

// SetHeaders writes RateLimit-Policy and RateLimit for quotas, and
// Retry-After (delay-seconds, rounded up) when retryAfter > 0.
func SetHeaders(h http.Header, quotas []Quota, retryAfter time.Duration) {
	if len(quotas) > 0 {
		setFields(h, FormatPolicy(quotas), quotas)
	}
	setRetryAfter(h, retryAfter)
}

// The canonical forms of the field names ("Ratelimit-Policy"), computed once:
// http.Header.Set would canonicalise, and allocate, on every response.
var (
	keyPolicy       = http.CanonicalHeaderKey(HeaderPolicy)
	keyRateLimit    = http.CanonicalHeaderKey(HeaderRateLimit)
	keyRetryAfter   = http.CanonicalHeaderKey(HeaderRetryAfter)
	keyLegacyLimit  = http.CanonicalHeaderKey(HeaderLegacyLimit)
	keyLegacyRemain = http.CanonicalHeaderKey(HeaderLegacyRemain)
	keyLegacyReset  = http.CanonicalHeaderKey(HeaderLegacyReset)
)

// setFields is SetHeaders for a caller that has the RateLimit-Policy value
// already (the middleware precomputes it: it changes only with the set of
// limits that applied).
func setFields(h http.Header, policy string, quotas []Quota) {
	h[keyPolicy] = []string{policy}
	h[keyRateLimit] = []string{FormatRateLimit(quotas)}
}

func setRetryAfter(h http.Header, retryAfter time.Duration) {
	if retryAfter > 0 {
		h[keyRetryAfter] = []string{strconv.FormatInt(Seconds(retryAfter), 10)}
	}
}

// setLegacyHeaders writes X-RateLimit-Limit, -Remaining and -Reset (delta
// seconds) for the most restrictive quota: the one with the fewest units
// remaining, and of those the one that resets last, since the legacy fields
// can describe only one limit and a client must not be told it has more room
// than it has.
func setLegacyHeaders(h http.Header, quotas []Quota) {
	if len(quotas) == 0 {
		return
	}
	m := quotas[0]
	for _, q := range quotas[1:] {
		if q.Result.Remaining < m.Result.Remaining ||
			q.Result.Remaining == m.Result.Remaining && q.Result.ResetAfter > m.Result.ResetAfter {
			m = q
		}
	}
	h[keyLegacyLimit] = []string{strconv.FormatInt(m.Policy.Limit, 10)}
	h[keyLegacyRemain] = []string{strconv.FormatInt(max(0, m.Result.Remaining), 10)}
	h[keyLegacyReset] = []string{strconv.FormatInt(Seconds(m.Result.ResetAfter), 10)}
}
