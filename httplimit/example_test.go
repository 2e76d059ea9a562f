package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memory"
)

// Two requests a minute per API key (per address without one), and 1000 a
// second for everyone, checked together.
func Example() {
	store := memory.New()
	perKey, _ := sluice.New(store, sluice.Policy{Name: "per-key", Algorithm: sluice.GCRA, Limit: 2, Period: time.Minute})
	global, _ := sluice.New(store, sluice.Policy{Name: "global", Algorithm: sluice.SlidingWindow, Limit: 1000, Period: time.Second})
	mw, err := httplimit.New(
		httplimit.Limit(perKey, httplimit.ByHeader("X-API-Key"), httplimit.WithFallbackKey(httplimit.ByIP())),
		httplimit.Limit(global, httplimit.Global()),
	)
	if err != nil {
		panic(err)
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))

	for range 3 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", "alice")
		h.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit-Policy: %s; Retry-After: %q\n", w.Code, w.Header().Get("RateLimit-Policy"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit-Policy: "per-key";q=2;w=60, "global";q=1000;w=1; Retry-After: ""
	// 200 RateLimit-Policy: "per-key";q=2;w=60, "global";q=1000;w=1; Retry-After: ""
	// 429 RateLimit-Policy: "per-key";q=2;w=60, "global";q=1000;w=1; Retry-After: "30"
}

// Tokens of a language model: a request is admitted while the user has
// tokens left (a peek, cost 0), and the tokens its response reports in
// X-Tokens-Used are charged when it ends. The second answer used more than
// was left, so the user owes the excess and waits for the next window.
func ExampleWithChargeFromHeader() {
	store := memory.New()
	tokens, _ := sluice.New(store, sluice.Policy{Name: "tokens", Algorithm: sluice.FixedWindow, Limit: 1000, Period: time.Hour})
	mw, err := httplimit.New(
		httplimit.Limit(tokens, httplimit.ByHeader("X-User"), httplimit.WithChargeFromHeader("X-Tokens-Used")),
		httplimit.WithCost(func(*http.Request) int64 { return 0 }),
	)
	if err != nil {
		panic(err)
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Tokens-Used", "600") // what the model generated
		fmt.Fprintln(w, "an answer")
	}))

	for range 3 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/v1/chat", nil)
		r.Header.Set("X-User", "carol")
		h.ServeHTTP(w, r)
		limit, _, _ := strings.Cut(w.Header().Get("RateLimit"), ";t=") // t: the window's end
		fmt.Println(w.Code, limit)
	}
	// Output:
	// 200 "tokens";r=1000
	// 200 "tokens";r=400
	// 429 "tokens";r=0
}
