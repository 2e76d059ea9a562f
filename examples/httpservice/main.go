// Command httpservice is a small HTTP service behind two rate limits checked
// together, all or nothing: 5 requests per 10 seconds per API key (per client
// address for requests without one) and 100 a minute for everyone, on the
// in-process memory store.
//
//	go run ./examples/httpservice    # listens on 127.0.0.1:8080; -addr to change
//
// Then, from another shell:
//
//	curl -i -H 'X-API-Key: alice' http://127.0.0.1:8080/    # 200 with RateLimit-Policy and RateLimit
//	for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code}\n' -H 'X-API-Key: alice' http://127.0.0.1:8080/; done
//	curl -i -H 'X-API-Key: alice' http://127.0.0.1:8080/    # 429 with Retry-After and a problem+json body
//	curl -i -H 'X-API-Key: bob' http://127.0.0.1:8080/      # bob has his own 5
//	curl -i http://127.0.0.1:8080/                          # no key: limited per address
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memory"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()

	store := memory.New() // one process; redisstore shares the counts between many
	perUser, err := sluice.New(store, sluice.Policy{Name: "per-user", Algorithm: sluice.GCRA, Limit: 5, Period: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	global, err := sluice.New(store, sluice.Policy{Name: "global", Algorithm: sluice.SlidingWindow, Limit: 100, Period: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	limits, err := httplimit.New(
		httplimit.Limit(perUser, httplimit.ByHeader("X-API-Key"), httplimit.WithFallbackKey(httplimit.ByIP())),
		httplimit.Limit(global, httplimit.Global()),
	)
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})
	srv := &http.Server{Addr: *addr, Handler: limits.Handler(mux), ReadHeaderTimeout: 10 * time.Second}
	log.Printf("listening on http://%s", *addr)
	log.Fatal(srv.ListenAndServe())
}
