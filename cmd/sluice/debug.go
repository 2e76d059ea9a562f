package main

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The debug port (--debug-addr, envoyproxy/ratelimit's DEBUG_HOST and
// DEBUG_PORT): the metrics and Go's profiler, net/http/pprof, on a port of
// their own. Off by default: a profile shows the process's memory, so the
// port belongs on loopback (DEBUG_PORT alone binds 127.0.0.1) or behind
// whatever guards the admin API, never open to clients.

// debugHandler serves GET /metrics from reg and the profiler under
// /debug/pprof/ (its index, cmdline, profile, symbol and trace, and every
// named profile: heap, goroutine, allocs, block, mutex, threadcreate).
func debugHandler(reg prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
