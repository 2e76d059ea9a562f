package httplimit

import (
	"net/http"
	"net/netip"
	"strings"
)

// Header fields a proxy can use to report the client it forwards for. See
// WithClientIPHeaders.
const (
	HeaderForwarded     = "Forwarded" // RFC 7239: for=192.0.2.60, for="[2001:db8::1]:4711"
	HeaderXForwardedFor = "X-Forwarded-For"
	HeaderXRealIP       = "X-Real-IP"
)

// ClientIP returns the address of the client that sent r: the immediate peer
// (r.RemoteAddr), unless that peer is in trusted. Only then are the header
// fields named in headers consulted: the first of them present in r, in the
// order given (see WithClientIPHeaders).
//
// A list-valued field (Forwarded, X-Forwarded-For) is walked from right to
// left, skipping addresses that are themselves trusted proxies: each proxy
// appends the address it received the request from, so the rightmost address
// that is not a trusted proxy is the first one that no trusted party can vouch
// beyond — everything left of it may have been written by the client. The walk
// stops at an entry that is not an address ("unknown", an obfuscated node, a
// malformed value) and answers the last address it trusted, never a value
// further left. When every entry is a trusted proxy, the leftmost is the
// client. Any other field (X-Real-IP, which holds one address) is read like
// X-Forwarded-For.
//
// IPv4-mapped IPv6 addresses are returned as IPv4 and zones are dropped, so
// that one client has one address. The result is invalid (the zero Addr) only
// when RemoteAddr is not an address, e.g. on a Unix socket.
func ClientIP(r *http.Request, trusted []netip.Prefix, headers ...string) netip.Addr {
	peer := parseNode(r.RemoteAddr)
	if !peer.IsValid() || !isTrusted(peer, trusted) {
		return peer
	}
	for _, name := range headers {
		name = http.CanonicalHeaderKey(name)
		values := r.Header[name]
		if len(values) == 0 {
			continue
		}
		var buf [8]netip.Addr
		if name == HeaderForwarded {
			return walk(peer, forwardedNodes(buf[:0], values), trusted)
		}
		return walk(peer, listNodes(buf[:0], values), trusted)
	}
	return peer
}

// walk returns the rightmost address of nodes that is not a trusted proxy,
// starting from the trusted peer; see ClientIP.
func walk(peer netip.Addr, nodes []netip.Addr, trusted []netip.Prefix) netip.Addr {
	client := peer
	for i := len(nodes) - 1; i >= 0; i-- {
		a := nodes[i]
		if !a.IsValid() {
			return client
		}
		client = a
		if !isTrusted(a, trusted) {
			return a
		}
	}
	return client
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// listNodes parses comma-separated X-Forwarded-For (or X-Real-IP) values, in
// order, across all the field's lines.
func listNodes(nodes []netip.Addr, values []string) []netip.Addr {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			nodes = append(nodes, parseNode(part))
		}
	}
	return nodes
}

// forwardedNodes parses the for= parameter of every Forwarded element, in
// order. An element without for= yields an invalid address, which stops the
// walk there: that hop did not say whom it received the request from.
func forwardedNodes(nodes []netip.Addr, values []string) []netip.Addr {
	for _, v := range values {
		for len(v) > 0 {
			var elem string
			elem, v = cut(v, ',')
			if strings.TrimSpace(elem) == "" {
				continue
			}
			var node netip.Addr
			for len(elem) > 0 {
				var pair string
				pair, elem = cut(elem, ';')
				name, value, ok := strings.Cut(pair, "=")
				if ok && strings.EqualFold(strings.TrimSpace(name), "for") {
					node = parseNode(unquote(strings.TrimSpace(value)))
					break
				}
			}
			nodes = append(nodes, node)
		}
	}
	return nodes
}

// cut splits s at the first sep that is not inside a quoted-string.
func cut(s string, sep byte) (before, after string) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// unquote returns the content of a quoted-string, or s itself when it is a
// token.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	s = s[1 : len(s)-1]
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseNode parses an address with or without a port: "192.0.2.1",
// "192.0.2.1:80", "2001:db8::1", "[2001:db8::1]" or "[2001:db8::1]:80".
func parseNode(s string) netip.Addr {
	s = strings.TrimSpace(s)
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
				return netip.Addr{}
			}
			if a, err = netip.ParseAddr(s[1 : len(s)-1]); err != nil {
				return netip.Addr{}
			}
		} else {
			a = ap.Addr()
		}
	}
	return a.Unmap().WithZone("")
}
