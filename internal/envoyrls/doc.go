// Package envoyrls is Sluice's front end for Envoy's global rate limiting: a
// gRPC server of the rate limit service protocol (envoy.service.ratelimit.v3,
// "RLS v3") that decides in a service.Service's engine (package engine), so it
// decides and counts exactly as the HTTP API does on the same configuration and
// store. It keeps only what is Envoy's: matching descriptors, replaces, the
// same (limit, key) from several descriptors summed, hits, and the response.
//
// # The model
//
// Envoy sends one RateLimitRequest per HTTP request: a domain and a list of
// descriptors, each a list of key/value entries built from the request by the
// route's rate limit actions (e.g. [("remote_address", "10.0.0.1")] or
// [("tenant", "acme"), ("path", "/upload")]). The configuration's domain tree
// (package config) says which limits a descriptor gets: its entries walk the
// tree one level per entry, exact values first, then globs ("*" anywhere),
// then defaults, as envoyproxy/ratelimit does.
//
// Every limit that matched becomes one check of a single all-or-nothing
// decision: the request passes only if every enforced limit admits it, and a
// denied request consumes nothing anywhere, so a client throttled by one limit
// does not also burn its quota on the others. The store key of a limit is the
// descriptor's entry values joined with '|' (the keys are implied by the path
// that matched); the same (limit, key) reached from two descriptors is one check
// charged their summed cost. A limit with plans takes its plan from a last
// entry whose key its plans name (config.Descriptor.PlanKey): that entry picks
// the limit the check is decided under and is no part of the key. Shadow limits are decided and reported but never
// deny. A limit named in another matched limit's replaces is dropped.
//
// The response has one status per descriptor, in order: OVER_LIMIT when one of
// its own enforced limits is exhausted, else OK; the limit it reports is the
// most restrictive of its limits, under its YAML name (empty when it has none),
// with the remaining quota and the time until the window resets (never 0), all
// of the limit applied: a runtime override's or the plan's when one applies
// (service.Resolve), else the configured one.
// An unlimited descriptor reports 4294967295 remaining, as envoyproxy/ratelimit
// does. overall_code is OVER_LIMIT iff the request was denied. Quota-mode
// limits (quota.go) are soft: reported, not enforced, unless all are gone.
// WithHeaders adds the RateLimit-Policy and RateLimit fields (and Retry-After
// when denied) for Envoy to add to the client's response; WithLimitHeaders
// adds envoyproxy/ratelimit's three headers.
//
// # Using it
//
//	st, err := storestack.Open(cfg.Store)
//	...
//	svc := service.New(st, cfg)
//	rls := envoyrls.New(svc, envoyrls.WithHeaders(true))
//	g := grpc.NewServer()
//	rls.Register(g) // the rate limit service and grpc.health.v1
//	go g.Serve(lis)
//	...
//	rls.Shutdown() // health says NOT_SERVING: load balancers drain us
//	g.GracefulStop()
//
// Errors: an error is let through by an Envoy with the default
// failure_mode_deny: false, so every rate limit request gets a decision. A
// value that is not UTF-8 is decided on its own counter (decode.go), a key
// over sluice.MaxKeyLen on its SHA-256 (key.go), and a request too large to
// decide (too many descriptors or entries, an override no policy can express)
// is OVER_LIMIT. Only what is not a rate limit request at all (no domain, no
// descriptors, not protobuf) is an error: codes.InvalidArgument, or gRPC's
// own INTERNAL. A store failure no fail policy decided is codes.Unavailable,
// which Envoy treats according to its failure_mode_deny.
package envoyrls
