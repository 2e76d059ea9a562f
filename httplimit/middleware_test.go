package httplimit_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
)

// Every step of a burst, allowed and denied, carries the right fields with
// the right values: GCRA 5 per 10 s (one unit every 2 s) per API key, and a
// fixed window of 100 per minute for everyone.
func TestHeadersAtEveryStepOfABurst(t *testing.T) {
	store, _ := fakeStore()
	perUser := newLimiter(t, store, sluice.Policy{Name: "per-user", Algorithm: sluice.GCRA, Limit: 5, Period: 10 * time.Second})
	global := newLimiter(t, store, sluice.Policy{Name: "global", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Minute})
	srv := serve(t,
		httplimit.Limit(perUser, httplimit.ByHeader("X-API-Key")),
		httplimit.Limit(global, httplimit.Global()),
	)
	for i := 1; i <= 7; i++ {
		r := get(t, srv.URL, "X-API-Key", "alice")
		wantFields(t, fmt.Sprintf("request %d RateLimit-Policy", i), parseList(t, r.Header.Values("RateLimit-Policy")),
			[]any{"per-user", "q", 5, "w", 10}, []any{"global", "q", 100, "w", 60})
		rl := parseList(t, r.Header.Values("RateLimit"))
		if i <= 5 {
			if r.StatusCode != http.StatusOK || string(r.body) != "ok" {
				t.Fatalf("request %d: %d %q, want 200 ok", i, r.StatusCode, r.body)
			}
			// Each admission pushes the key's reset 2 s further away.
			wantFields(t, fmt.Sprintf("request %d RateLimit", i), rl,
				[]any{"per-user", "r", 5 - i, "t", 2 * i}, []any{"global", "r", 100 - i, "t", 60})
			if v := r.Header.Values("Retry-After"); v != nil {
				t.Fatalf("request %d: allowed with Retry-After %q", i, v)
			}
			continue
		}
		if r.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("request %d: %d, want 429", i, r.StatusCode)
		}
		// Denied: nothing consumed on either limit; the next unit drains in 2 s.
		wantFields(t, fmt.Sprintf("request %d RateLimit", i), rl,
			[]any{"per-user", "r", 0, "t", 10}, []any{"global", "r", 95, "t", 60})
		if n := retryAfter(t, r); n != 2 {
			t.Fatalf("request %d: Retry-After %d, want 2", i, n)
		}
		if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
			t.Fatalf("request %d: Cache-Control %q", i, cc)
		}
	}
}

// Whatever the algorithm, a client that waits exactly Retry-After seconds
// gets in, and Retry-After is never shorter than the exact RetryAfter.
func TestRetryAfterIsEnoughAndNeverEarly(t *testing.T) {
	for _, alg := range sluice.Algorithms {
		t.Run(string(alg), func(t *testing.T) {
			store, clock := fakeStore()
			// 3 per 2.5 s: emission interval 833,334 µs, windows of 2.5 s, so the
			// exact waits are not whole seconds and rounding matters.
			lim := newLimiter(t, store, sluice.Policy{Name: "p", Algorithm: alg, Limit: 3, Period: 2500 * time.Millisecond})
			var exact time.Duration
			srv := serve(t,
				httplimit.Limit(lim, httplimit.Global()),
				httplimit.WithMaxDelay(0), // leaky bucket: do not sleep for its Delay here
				httplimit.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, d httplimit.Denial) {
					exact = d.RetryAfter
					httplimit.WriteDenial(w, r, d)
				}),
			)
			clock.Advance(700 * time.Millisecond) // off the window boundary
			for round := 0; round < 3; round++ {
				var denied response
				for i := 0; ; i++ {
					r := get(t, srv.URL)
					if r.StatusCode == http.StatusTooManyRequests {
						denied = r
						break
					}
					if r.StatusCode != http.StatusOK || i > 3 {
						t.Fatalf("round %d request %d: %d, want 200 until the limit is reached", round, i, r.StatusCode)
					}
				}
				n := retryAfter(t, denied)
				if exact <= 0 || time.Duration(n)*time.Second < exact || time.Duration(n-1)*time.Second >= exact {
					t.Fatalf("round %d: Retry-After %d for an exact wait of %v, want it rounded up", round, n, exact)
				}
				clock.Advance(time.Duration(n) * time.Second)
				if r := get(t, srv.URL); r.StatusCode != http.StatusOK {
					t.Fatalf("round %d: %d after waiting Retry-After %ds, want 200", round, r.StatusCode, n)
				}
			}
		})
	}
}

// WithRetryJitter only ever adds time, within its bound.
func TestRetryJitter(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 3, Period: time.Second})
	srv := serve(t, httplimit.Limit(lim, httplimit.Global()), httplimit.WithRetryJitter(2*time.Second))
	for range 3 {
		get(t, srv.URL)
	}
	// The exact wait is 333,334 µs, so Retry-After is 1 without jitter and at
	// most ceil(0.333334 + 2) = 3 with it.
	seen := map[int64]bool{}
	for range 60 {
		r := get(t, srv.URL)
		n := retryAfter(t, r)
		if n < 1 || n > 3 {
			t.Fatalf("Retry-After %d, want 1 to 3", n)
		}
		seen[n] = true
	}
	if len(seen) < 2 {
		t.Fatalf("Retry-After took only the values %v in 60 denials: no jitter", seen)
	}
}

// A request denied by the global limit consumes nothing on the per-user one.
func TestAllOrNothing(t *testing.T) {
	store, _ := fakeStore()
	perUser := newLimiter(t, store, sluice.Policy{Name: "per-user", Algorithm: sluice.GCRA, Limit: 5, Period: time.Minute})
	global := newLimiter(t, store, sluice.Policy{Name: "global", Algorithm: sluice.FixedWindow, Limit: 3, Period: time.Minute})
	srv := serve(t,
		httplimit.Limit(perUser, httplimit.ByHeader("X-API-Key")),
		httplimit.Limit(global, httplimit.Global()),
	)
	for range 3 {
		if r := get(t, srv.URL, "X-API-Key", "alice"); r.StatusCode != http.StatusOK {
			t.Fatalf("alice: %d", r.StatusCode)
		}
	}
	for range 2 {
		r := get(t, srv.URL, "X-API-Key", "bob")
		if r.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("bob: %d, want 429 from the global limit", r.StatusCode)
		}
		if n := retryAfter(t, r); n != 60 {
			t.Fatalf("bob: Retry-After %d, want 60 (the window's end)", n)
		}
		wantFields(t, "bob's RateLimit", parseList(t, r.Header.Values("RateLimit")),
			[]any{"per-user", "r", 5, "t", 0}, []any{"global", "r", 0, "t", 60})
		var p struct {
			Violated []struct{ Name string } `json:"violated_policies"`
		}
		if err := json.Unmarshal(r.body, &p); err != nil || len(p.Violated) != 1 || p.Violated[0].Name != "global" {
			t.Fatalf("bob's problem %s (%v): want global alone violated", r.body, err)
		}
	}
	if n := peek(t, perUser, "bob"); n != 5 {
		t.Fatalf("bob has %d of 5 left on per-user after two denials, want all 5", n)
	}
	if n := peek(t, perUser, "alice"); n != 2 {
		t.Fatalf("alice has %d left, want 2", n)
	}
}

func TestProblemBody(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "per-ip", Algorithm: sluice.TokenBucket, Limit: 2, Period: 4 * time.Second})
	srv := serve(t, httplimit.Limit(lim, httplimit.ByIP()))
	get(t, srv.URL)
	get(t, srv.URL)
	r := get(t, srv.URL)
	if r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d", r.StatusCode)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var p map[string]any
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	want := map[string]any{
		"type":   httplimit.ProblemRateLimited,
		"title":  "Too Many Requests",
		"status": 429.0,
		"detail": "Rate limit exceeded (per-ip); retry in 2 s.",
		"violated_policies": []any{map[string]any{
			"name": "per-ip", "limit": 2.0, "window": 4.0, "remaining": 0.0, "retry_after": 2.0,
		}},
	}
	if fmt.Sprint(p) != fmt.Sprint(want) {
		t.Fatalf("problem\n%v\nwant\n%v", p, want)
	}
}

func TestCustomDenyHandler(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 1, Period: 30 * time.Second})
	srv := serve(t, httplimit.Limit(lim, httplimit.Global()),
		httplimit.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, d httplimit.Denial) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "slow down: %s for %v", d.Violated[0].Policy.Name, d.RetryAfter)
		}))
	get(t, srv.URL)
	r := get(t, srv.URL)
	if r.StatusCode != http.StatusServiceUnavailable || string(r.body) != "slow down: p for 30s" {
		t.Fatalf("%d %q", r.StatusCode, r.body)
	}
	// The fields are the middleware's job, whatever the handler writes.
	if n := retryAfter(t, r); n != 30 || r.Header.Get("RateLimit") == "" || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("headers %v", r.Header)
	}
}

func TestStoreError(t *testing.T) {
	boom := errors.New("redis: connection refused")
	lim := newLimiter(t, failingStore{boom}, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second})
	t.Run("default", func(t *testing.T) {
		var log syncBuffer
		srv := serve(t, httplimit.Limit(lim, httplimit.Global()),
			httplimit.WithLogger(slogTo(&log)))
		r := get(t, srv.URL)
		var p map[string]any
		if r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Content-Type") != "application/problem+json" ||
			json.Unmarshal(r.body, &p) != nil || p["type"] != httplimit.ProblemUnavailable || p["status"] != 503.0 {
			t.Fatalf("%d %v %s", r.StatusCode, r.Header, r.body)
		}
		if !strings.Contains(log.String(), "connection refused") || !strings.Contains(log.String(), "level=ERROR") {
			t.Fatalf("log %q does not report the error", log.String())
		}
	})
	t.Run("custom", func(t *testing.T) {
		srv := serve(t, httplimit.Limit(lim, httplimit.Global()),
			httplimit.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
				if !errors.Is(err, boom) {
					t.Errorf("error %v does not wrap the store's", err)
				}
				w.WriteHeader(http.StatusTeapot)
			}))
		if r := get(t, srv.URL); r.StatusCode != http.StatusTeapot {
			t.Fatalf("%d", r.StatusCode)
		}
	})
}

// A missing key skips the limit by default; WithFallbackKey counts such requests
// under another key, in a key space no header value can reach.
func TestMissingKey(t *testing.T) {
	store, _ := fakeStore()
	perUser := newLimiter(t, store, sluice.Policy{Name: "per-user", Algorithm: sluice.GCRA, Limit: 2, Period: time.Minute})
	global := newLimiter(t, store, sluice.Policy{Name: "global", Algorithm: sluice.GCRA, Limit: 100, Period: time.Minute})
	t.Run("skip", func(t *testing.T) {
		srv := serve(t,
			httplimit.Limit(perUser, httplimit.ByHeader("X-API-Key")),
			httplimit.Limit(global, httplimit.Global()),
		)
		for i := range 4 {
			r := get(t, srv.URL)
			if r.StatusCode != http.StatusOK {
				t.Fatalf("request %d without a key: %d", i, r.StatusCode)
			}
			wantFields(t, "RateLimit-Policy", parseList(t, r.Header.Values("RateLimit-Policy")), []any{"global", "q", 100, "w", 60})
		}
	})
	perUser = newLimiter(t, store, sluice.Policy{Name: "per-user-fb", Algorithm: sluice.GCRA, Limit: 2, Period: time.Minute})
	t.Run("fallback", func(t *testing.T) {
		srv := serve(t, httplimit.Limit(perUser, httplimit.ByHeader("X-API-Key"), httplimit.WithFallbackKey(httplimit.ByIP())))
		for i, want := range []int{200, 200, 429} {
			if r := get(t, srv.URL); r.StatusCode != want {
				t.Fatalf("anonymous request %d: %d, want %d", i, r.StatusCode, want)
			}
		}
		// An API key that spells the fallback's key is a different bucket.
		for _, k := range []string{"127.0.0.1", "fallback:127.0.0.1"} {
			if r := get(t, srv.URL, "X-API-Key", k); r.StatusCode != http.StatusOK {
				t.Fatalf("X-API-Key %q: %d, want its own bucket", k, r.StatusCode)
			}
		}
	})
}

// Keys combines parts unambiguously, and a request missing a part has no key.
func TestCombinedKeys(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Minute})
	srv := serve(t, httplimit.Limit(lim, httplimit.Keys(httplimit.ByHeader("A"), httplimit.ByHeader("B"))))
	for _, ab := range [][2]string{{"x|y", "z"}, {"x", "y|z"}, {`x\`, "|z"}, {"x", `\|z`}} {
		if r := get(t, srv.URL, "A", ab[0], "B", ab[1]); r.StatusCode != http.StatusOK {
			t.Fatalf("A=%q B=%q: %d: shares a bucket with an earlier pair", ab[0], ab[1], r.StatusCode)
		}
		if r := get(t, srv.URL, "A", ab[0], "B", ab[1]); r.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("A=%q B=%q again: %d, want 429", ab[0], ab[1], r.StatusCode)
		}
	}
	if n := peek(t, lim, `x\|y|z`); n != 0 {
		t.Fatalf(`key x\|y|z has %d left, want the pair ("x|y", "z") to have used it`, n)
	}
	for i := range 3 { // B missing: the limit does not apply
		if r := get(t, srv.URL, "A", "x|y"); r.StatusCode != http.StatusOK || r.Header.Get("RateLimit") != "" {
			t.Fatalf("request %d without B: %d %v", i, r.StatusCode, r.Header)
		}
	}
}

func TestKeyFuncError(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second})
	bad := errors.New("token signature invalid")
	var got error
	srv := serve(t,
		httplimit.Limit(lim, httplimit.ByFunc(func(*http.Request) (string, error) { return "", bad })),
		httplimit.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			got = err
			w.WriteHeader(http.StatusUnauthorized)
		}))
	if r := get(t, srv.URL); r.StatusCode != http.StatusUnauthorized || !errors.Is(got, bad) || !strings.Contains(got.Error(), `"p"`) {
		t.Fatalf("%d, error %v", r.StatusCode, got)
	}
}

// A key longer than the store accepts is still counted, on its own.
func TestLongKey(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Minute})
	srv := serve(t, httplimit.Limit(lim, httplimit.ByHeader("X-API-Key")))
	a, b := strings.Repeat("a", 4000), strings.Repeat("a", 3999)+"b"
	for _, k := range []string{a, b} {
		if r := get(t, srv.URL, "X-API-Key", k); r.StatusCode != http.StatusOK {
			t.Fatalf("first request: %d", r.StatusCode)
		}
	}
	if r := get(t, srv.URL, "X-API-Key", a); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second request: %d, want 429", r.StatusCode)
	}
}

func TestCost(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 5, Period: 5 * time.Second})
	var log syncBuffer
	srv := serve(t, httplimit.Limit(lim, httplimit.Global()), httplimit.WithLogger(slogTo(&log)),
		httplimit.WithCost(func(r *http.Request) int64 {
			n, _ := strconv.ParseInt(r.Header.Get("X-Cost"), 10, 64)
			return n
		}))
	r := get(t, srv.URL, "X-Cost", "3")
	wantFields(t, "RateLimit", parseList(t, r.Header.Values("RateLimit")), []any{"p", "r", 2, "t", 3})
	r = get(t, srv.URL, "X-Cost", "3")
	if r.StatusCode != http.StatusTooManyRequests || retryAfter(t, r) != 1 {
		t.Fatalf("second cost 3: %d, Retry-After %q", r.StatusCode, r.Header.Get("Retry-After"))
	}
	if r = get(t, srv.URL, "X-Cost", "0"); r.StatusCode != http.StatusOK {
		t.Fatalf("cost 0 (a peek): %d", r.StatusCode)
	}
	if r = get(t, srv.URL, "X-Cost", "6"); r.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("cost above capacity: %d, want 413", r.StatusCode)
	}
	if !strings.Contains(log.String(), "level=INFO") || !strings.Contains(log.String(), "exceeds the capacity") {
		t.Fatalf("log %q: want the client's error at level INFO", log.String())
	}
	if n := peek(t, lim, "global"); n != 2 {
		t.Fatalf("%d left, want 2", n)
	}
	// Once nothing is left, a cost of 0 is denied too: the check before work
	// whose cost is charged afterwards.
	if r = get(t, srv.URL, "X-Cost", "2"); r.StatusCode != http.StatusOK {
		t.Fatalf("the last 2 units: %d", r.StatusCode)
	}
	if r = get(t, srv.URL, "X-Cost", "0"); r.StatusCode != http.StatusTooManyRequests || retryAfter(t, r) != 1 {
		t.Fatalf("cost 0 with nothing left: %d, Retry-After %q; want 429 for one unit's wait", r.StatusCode, r.Header.Get("Retry-After"))
	}
}

func TestLegacyAndQuietHeaders(t *testing.T) {
	store, _ := fakeStore()
	a := newLimiter(t, store, sluice.Policy{Name: "a", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute})
	b := newLimiter(t, store, sluice.Policy{Name: "b", Algorithm: sluice.GCRA, Limit: 3, Period: 3 * time.Second})
	srv := serve(t, httplimit.Limit(a, httplimit.Global()), httplimit.Limit(b, httplimit.Global()),
		httplimit.WithLegacyHeaders(), httplimit.WithHeadersOnDenialOnly())
	for range 3 {
		if r := get(t, srv.URL); r.StatusCode != http.StatusOK || r.Header.Get("RateLimit") != "" ||
			r.Header.Get("RateLimit-Policy") != "" || r.Header.Get("X-RateLimit-Limit") != "" {
			t.Fatalf("allowed: %d %v, want no rate-limit fields", r.StatusCode, r.Header)
		}
	}
	r := get(t, srv.URL)
	// b has 0 left of 3 (resets in 3 s); a has 7 of 10: b is reported.
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("X-RateLimit-Limit") != "3" ||
		r.Header.Get("X-RateLimit-Remaining") != "0" || r.Header.Get("X-RateLimit-Reset") != "3" {
		t.Fatalf("denied: %d %v", r.StatusCode, r.Header)
	}
	wantFields(t, "RateLimit", parseList(t, r.Header.Values("RateLimit")), []any{"a", "r", 7, "t", 60}, []any{"b", "r", 0, "t", 3})
}

func TestNewRejectsBadConfigurations(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second})
	for name, opts := range map[string][]httplimit.Option{
		"no limits":         nil,
		"nil limiter":       {httplimit.Limit(nil, httplimit.Global())},
		"zero key":          {httplimit.Limit(lim, httplimit.Key{})},
		"zero part":         {httplimit.Limit(lim, httplimit.Keys(httplimit.ByIP(), httplimit.Key{}))},
		"same policy twice": {httplimit.Limit(lim, httplimit.ByIP()), httplimit.Limit(lim, httplimit.Global())},
		"bad CIDR":          {httplimit.Limit(lim, httplimit.ByIP()), httplimit.WithTrustedProxies("10.0.0.0/33")},
		"IPv6 prefix 0":     {httplimit.Limit(lim, httplimit.ByIP()), httplimit.WithIPv6Prefix(0)},
		"negative jitter":   {httplimit.Limit(lim, httplimit.ByIP()), httplimit.WithRetryJitter(-time.Second)},
	} {
		if _, err := httplimit.New(opts...); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// The package example, run: what a user copies must work.
func TestMiddlewareWrapsAnyHandler(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello/{name}", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello "+r.PathValue("name"))
	})
	srv := serveHandler(t, mux, httplimit.Limit(lim, httplimit.ByIP()))
	if r := get(t, srv.URL+"/hello/x"); r.StatusCode != 200 || string(r.body) != "hello x" {
		t.Fatalf("%d %q", r.StatusCode, r.body)
	}
	if r := get(t, srv.URL+"/hello/x"); r.StatusCode != 429 {
		t.Fatalf("%d", r.StatusCode)
	}
}
