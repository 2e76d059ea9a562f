package httplimit_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// Header values that are not valid UTF-8 keep their bytes: each is its own
// bucket, distinct from the others and from U+FFFD, which a decoder that
// replaces bad bytes would make of them all. Checked on the memory store and
// on a real redis-server, through a real HTTP server.
func TestHeaderValuesKeepTheirBytes(t *testing.T) {
	mem, _ := fakeStore()
	stores := map[string]sluice.Store{"memory": mem}
	srv := redistest.Start(t)
	rs, err := redisstore.Open(srv.URL(), redisstore.WithPrefix(fmt.Sprintf("httplimit%d:", time.Now().UnixNano())),
		redisstore.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Close() })
	stores["redis"] = rs
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			p := sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Hour}
			lim := newLimiter(t, store, p)
			srv := serve(t,
				httplimit.Limit(lim, httplimit.ByHeader("X-API-Key")),
				httplimit.Limit(newLimiter(t, store, sluice.Policy{Name: "pair", Algorithm: p.Algorithm, Limit: 1, Period: p.Period}),
					httplimit.Keys(httplimit.ByHeader("X-API-Key"), httplimit.ByHeader("X-Tenant"))))
			values := []string{"\xff", "\xfe", "\ufffd", "a\xffb", "a\xfeb", "\xc3\x28"}
			for _, v := range values {
				if r := get(t, srv.URL, "X-API-Key", v, "X-Tenant", "\x80"); r.StatusCode != http.StatusOK {
					t.Fatalf("%q: %d: shares a bucket with an earlier value", v, r.StatusCode)
				}
			}
			for _, v := range values {
				if r := get(t, srv.URL, "X-API-Key", v, "X-Tenant", "\x80"); r.StatusCode != http.StatusTooManyRequests {
					t.Fatalf("%q again: %d, want 429", v, r.StatusCode)
				}
				if n := peek(t, lim, v); n != 0 {
					t.Fatalf("%q: the bucket of its exact bytes has %d left, want 0", v, n)
				}
			}
		})
	}
}
