package proxy

import (
	"net/http"
	"path"
	"slices"
	"strings"
)

// handler dispatches each request to the first route that matches it, or
// straight to the upstream.
type handler struct {
	routes []route
	next   http.Handler // the reverse proxy
}

// route is a configured route: what it matches and the handler (the
// route's middleware in front of the reverse proxy) that serves it.
type route struct {
	prefix  string
	methods []string
	headers map[string]string
	h       http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := cleanPath(r.URL.Path)
	for i := range h.routes {
		if h.routes[i].matches(r, p) {
			h.routes[i].h.ServeHTTP(w, r)
			return
		}
	}
	h.next.ServeHTTP(w, r) // no route: unlimited, as documented
}

func (rt *route) matches(r *http.Request, cleaned string) bool {
	if !strings.HasPrefix(cleaned, rt.prefix) {
		return false
	}
	if len(rt.methods) > 0 && !slices.Contains(rt.methods, r.Method) {
		return false
	}
	for name, want := range rt.headers {
		if !slices.Contains(r.Header[name], want) {
			return false
		}
	}
	return true
}

// cleanPath is the path routes are matched on: without dot segments or
// repeated slashes, so that /public/../admin/ cannot dodge /admin/'s limits
// while an upstream that cleans paths serves /admin/. A trailing slash is
// kept, since prefixes such as /api/ rely on it.
func cleanPath(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}
