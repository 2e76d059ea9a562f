// Package httplimit is Sluice's net/http middleware: it limits requests by
// client IP, header or any key function, answers denials with 429 and an exact
// Retry-After, and writes the IETF RateLimit-Policy and RateLimit fields.
//
// # The model
//
// A Middleware holds limits. Each Limit pairs a *sluice.Limiter (a policy on a
// store) with a Key that says which bucket a request is counted in: ByIP,
// ByHeader, ByFunc, Global, or several combined with Keys. For every request
// the middleware checks all its limits at once, all or nothing: either every
// limit admits the request and each is charged its cost, or none is charged
// and the client gets 429 Too Many Requests with
//
//   - Retry-After: the wait after which the request is admitted, in seconds
//     rounded up, so a client that obeys it never comes back too early;
//   - RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers),
//     which allowed responses carry too;
//   - an application/problem+json body (RFC 9457) naming the limits that denied.
//
// Limits with the LeakyBucket algorithm shape rather than just admit: an
// admitted request waits for its Delay before it reaches the handler, so the
// handler sees a constant rate. Shadow limits are decided and reported but
// never enforced.
//
// Limits with the Concurrency algorithm bound the requests in flight: an
// admitted request holds one slot of its key while the handler runs, whatever
// its cost, and gives it back when the handler returns or panics, or its
// client goes away (a slot never given back returns after the policy's
// Period, its lease).
//
// # Using it
//
//	store := memory.New()
//	perKey, _ := sluice.New(store, sluice.Policy{Name: "per-key", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second})
//	global, _ := sluice.New(store, sluice.Policy{Name: "global", Algorithm: sluice.SlidingWindow, Limit: 1000, Period: time.Second})
//	mw, err := httplimit.New(
//		httplimit.Limit(perKey, httplimit.ByHeader("X-API-Key"), httplimit.WithFallbackKey(httplimit.ByIP())),
//		httplimit.Limit(global, httplimit.Global()),
//	)
//	...
//	http.ListenAndServe(addr, mw.Handler(mux))
//
// Behind a reverse proxy, name it with WithTrustedProxies, or every client looks
// like the proxy.
package httplimit
