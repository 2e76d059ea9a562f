package httplimit

import (
	"net/http"
	"net/netip"

	"github.com/sluicehq/sluice/internal/limitcore"
)

// Key tells a limit which bucket a request is counted in: requests with the
// same key share one count. Build one with ByIP, ByHeader, ByFunc, Global or
// Keys.
//
// A request for which a Key yields the empty string has no key — a header that
// is absent, say. By default the limit then does not apply to that request;
// WithFallbackKey names another Key to use instead.
type Key struct {
	get limitcore.KeyFunc[*request]
}

// request is one request as the keys see it. The client address is worked out
// once, and only if a key asks for it.
type request struct {
	*http.Request
	m      *Middleware
	ip     netip.Addr
	ipDone bool
	resp   *responseWriter // for a limit charged from the response
}

func (q *request) clientIP() netip.Addr {
	if !q.ipDone {
		q.ip = ClientIP(q.Request, q.m.cfg.trusted, q.m.cfg.ipHeaders...)
		q.ipDone = true
	}
	return q.ip
}

// ByIP keys requests by client address (see ClientIP, WithTrustedProxies and
// WithIPv6Prefix): an IPv4 address as it is, an IPv6 address by its /64 (or the
// configured prefix). A request whose peer is not an IP address (a Unix
// socket) has no key.
func ByIP() Key {
	return Key{get: func(q *request) (string, error) {
		ip := q.clientIP()
		if !ip.IsValid() {
			return "", nil
		}
		return limitcore.IPKey(ip, q.m.cfg.V6Bits), nil
	}}
}

// ByHeader keys requests by the first value of the header field name, such as
// "X-API-Key". A request without the field, or with an empty value, has no key.
// The value is the key byte for byte: one that is not UTF-8 is not altered, so
// it never shares a bucket with another value.
func ByHeader(name string) Key {
	name = http.CanonicalHeaderKey(name)
	return Key{get: func(q *request) (string, error) {
		if v := q.Header[name]; len(v) > 0 {
			return v[0], nil
		}
		return "", nil
	}}
}

// ByFunc keys requests by what f returns. f returns "" when the request has no
// key; an error fails the request through the error handler (see WithErrorHandler).
func ByFunc(f func(*http.Request) (string, error)) Key {
	return Key{get: func(q *request) (string, error) { return f(q.Request) }}
}

// Global puts every request in one bucket, for a limit on the whole service.
func Global() Key {
	return Key{get: func(*request) (string, error) { return "global", nil }}
}

// Keys combines several keys into one: a request is counted per distinct
// combination, e.g. Keys(ByHeader("X-API-Key"), ByIP()) per API key and
// address. The parts are joined unambiguously (no two different combinations
// make the same key). A request that lacks any of the parts has no key.
func Keys(keys ...Key) Key {
	parts := make([]limitcore.KeyFunc[*request], len(keys))
	for i, k := range keys {
		parts[i] = k.get
	}
	return Key{get: limitcore.Join(parts...)}
}
