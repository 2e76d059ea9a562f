package proxy

import (
	"net/http"
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
	p := matchPath(r.URL.Path)
	for i := range h.routes {
		if h.routes[i].matches(r, p) {
			h.routes[i].h.ServeHTTP(w, r)
			return
		}
	}
	h.next.ServeHTTP(w, r) // no route: unlimited, as documented
}

// matches reports whether r, whose path read as matchPath reads it is p,
// takes rt; rt.prefix was read the same way.
func (rt *route) matches(r *http.Request, p string) bool {
	if !strings.HasPrefix(p, rt.prefix) {
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
