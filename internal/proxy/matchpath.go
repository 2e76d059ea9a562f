package proxy

import (
	"net/url"
	"path"
	"strings"
)

// maxUnescapes bounds how often matchPath percent-decodes a path: enough for
// an upstream that decodes twice, and for a third layer of encoding.
const maxUnescapes = 3

// matchPath is the path routes are matched on, and how a route's
// path_prefix is read: the path as the most lenient of the common upstreams
// would read it, so that no spelling of a limited path slips past its route
// to an upstream that serves it there. It is
//
//   - percent-decoded until nothing is left to decode (Go has decoded it
//     once; some upstreams decode again),
//   - with "\" read as "/" (IIS, some Windows servers),
//   - without ";parameters" in any segment (servlet containers: /api;x/a is
//     /api/a),
//   - without dot segments or repeated slashes (path.Clean; a trailing
//     slash, or a last dot segment, leaves one, since prefixes such as
//     /api/ rely on it),
//   - in lower case (case-insensitive file systems and routers).
//
// So /API/a, /api;v=1/a, /api//a, /%61pi/a, /%2561pi/a and /x/../api/a all
// take a route for /api/. A request is forwarded as it was sent: only the
// choice of route reads it this way. Two prefixes that differ only in case
// are one prefix; the first route wins.
func matchPath(p string) string {
	if plain(p) {
		return p
	}
	for range maxUnescapes {
		if !strings.Contains(p, "%") {
			break
		}
		u, err := url.PathUnescape(p)
		if err != nil || u == p {
			break
		}
		p = u
	}
	p = strings.ReplaceAll(p, "\\", "/")
	if strings.Contains(p, ";") {
		segs := strings.Split(p, "/")
		for i, s := range segs {
			if j := strings.IndexByte(s, ';'); j >= 0 {
				segs[i] = s[:j]
			}
		}
		p = strings.Join(segs, "/")
	}
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	c := path.Clean(p)
	if c != "/" && (strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..")) {
		c += "/" // /api/. and /api/x/.. are the directory /api/
	}
	return strings.ToLower(c)
}

// plain reports whether matchPath would leave p as it is: it starts with
// "/", and has no upper case letter, no byte beyond ASCII, no "%", "\" or
// ";", no repeated slash and no dot segment. Most paths are plain, and cost
// no allocation.
func plain(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c >= 'A' && c <= 'Z', c >= 0x80, c == '%', c == '\\', c == ';':
			return false
		case c == '/' && i+1 < len(p):
			// "//", "/." (a dot segment, or a name starting with a dot:
			// cleaning leaves that as it is, at the cost of a copy).
			if n := p[i+1]; n == '/' || n == '.' {
				return false
			}
		}
	}
	return true
}
