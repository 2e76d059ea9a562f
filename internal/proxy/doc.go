// Package proxy is Sluice's rate-limiting reverse proxy: it puts the limits of
// a configuration's proxy: section in front of an HTTP upstream, so that a
// service gets rate limiting without a line of code.
//
// Each request is matched against the routes in order (path prefix, methods,
// headers); the first route that matches keys the request for each of its
// limits and has the service's engine (package engine) decide it, as every
// front end does — runtime overrides, plans, shadow policies and bans
// included, each decision counted in the service's metrics — and answers as
// package httplimit does: the same 429s, Retry-After, RateLimit fields and
// leaky-bucket shaping. An admitted request is passed to the upstream by an
// httputil.ReverseProxy. A request that matches no route, or a route without
// limits, is passed on unlimited: end the routes with a catch-all (a route
// without match:) to bound everything. The routes follow the service's
// configuration: after a reload the next request takes the new ones.
//
//	cfg, _ := config.Load("proxy.yaml")
//	st, _ := storestack.Open(cfg.Store)
//	h, err := proxy.New(service.New(st, cfg), upstream)
//	...
//	http.ListenAndServe(":8080", h)
//
// Paths are matched as the most lenient common upstream reads them
// (percent-decoded, ";parameters" dropped, dot segments and repeated slashes
// resolved, any case), so /public/../admin/, /ADMIN/ and /admin;x/ are
// limited as /admin/; the request is forwarded as sent. The upstream sees the upstream's Host, the original host
// in X-Forwarded-Host, and X-Forwarded-For / X-Forwarded-Proto as
// httputil.ProxyRequest.SetXForwarded writes them.
//
// ForwardAuth serves the same routes to gateways that ask before they
// forward (Traefik's ForwardAuth, Caddy's forward_auth, nginx's
// auth_request): it rebuilds the request a gateway describes in
// X-Forwarded-Method, X-Forwarded-Uri and X-Forwarded-Host and answers 200
// to admit it or 429 (403 for nginx) to deny it, with the same fields.
package proxy
