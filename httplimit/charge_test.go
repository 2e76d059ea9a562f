package httplimit_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testwait"
)

// reporting answers 200 with the usage in X-Tokens-Used, when the request
// asks for one in its ?used= parameter.
var reporting = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if used := r.URL.Query().Get("used"); used != "" {
		w.Header().Set("X-Tokens-Used", used)
	}
	io.WriteString(w, "ok")
})

func peekCost(*http.Request) int64 { return 0 }

// A fixed window of 10 a minute, checked with a peek: a response reporting
// 15 tokens puts the key in debt, denied until the window ends.
func TestChargeFromHeaderFixedWindow(t *testing.T) {
	store, clock := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "tokens", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute})
	srv := serveHandler(t, reporting,
		httplimit.Limit(lim, httplimit.ByHeader("X-User"), httplimit.WithChargeFromHeader("x-tokens-used")),
		httplimit.WithCost(peekCost))

	if r := get(t, srv.URL+"?used=15", "X-User", "alice"); r.StatusCode != 200 {
		t.Fatalf("first request: %d, want 200", r.StatusCode)
	}
	if got := left(t, lim, "alice"); got != -5 {
		t.Fatalf("remaining after a charge of 15 on 10: %d, want -5 (a debt)", got)
	}
	clock.Advance(20 * time.Second)
	r := get(t, srv.URL, "X-User", "alice")
	if r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("after the charge: %d, want 429", r.StatusCode)
	}
	if got := retryAfter(t, r); got != 40 {
		t.Fatalf("Retry-After %d, want 40 (the window's end)", got)
	}
	if r := get(t, srv.URL, "X-User", "bob"); r.StatusCode != 200 {
		t.Fatalf("another key: %d, want 200", r.StatusCode)
	}
	clock.Advance(40 * time.Second)
	if r := get(t, srv.URL, "X-User", "alice"); r.StatusCode != 200 {
		t.Fatalf("next window: %d, want 200", r.StatusCode)
	}
}

// A token bucket of 10 refilled at 10 a minute: a charge of 15 leaves a
// debt of 5, repaid at the bucket's rate.
func TestChargeFromHeaderTokenBucket(t *testing.T) {
	store, clock := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "tokens", Algorithm: sluice.TokenBucket, Limit: 10, Period: time.Minute, Burst: 10})
	srv := serveHandler(t, reporting,
		httplimit.Limit(lim, httplimit.Global(), httplimit.WithChargeFromHeader("X-Tokens-Used")),
		httplimit.WithCost(peekCost))

	get(t, srv.URL+"?used=15", "X-User", "alice")
	if got := left(t, lim, "global"); got != -5 {
		t.Fatalf("remaining after a charge of 15 on 10: %d, want -5", got)
	}
	r := get(t, srv.URL)
	if r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("in debt: %d, want 429", r.StatusCode)
	}
	// 5 owed, then the one unit a peek needs left, at one token per 6 s.
	ra := retryAfter(t, r)
	if ra != 36 {
		t.Fatalf("Retry-After %d, want 36 (the debt of 5 and one unit, at 6 s a token)", ra)
	}
	clock.Advance(time.Duration(ra-1) * time.Second)
	if r := get(t, srv.URL); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("1 s before Retry-After: %d, want 429", r.StatusCode)
	}
	clock.Advance(time.Second)
	if r := get(t, srv.URL); r.StatusCode != 200 {
		t.Fatalf("at Retry-After: %d, want 200", r.StatusCode)
	}
}

// A value that is not one non-negative integer is logged and charges
// nothing; so does a response without the header.
func TestChargeFromHeaderBadValues(t *testing.T) {
	for _, v := range []string{"-1", "+3", "1.5", " 7", "7 tokens", "abc", "", "99999999999999999999", "3,4"} {
		t.Run(v, func(t *testing.T) {
			store, _ := fakeStore()
			lim := newLimiter(t, store, sluice.Policy{Name: "tokens", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute})
			var logs syncBuffer
			srv := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for _, part := range strings.Split(v, ",") {
					if v != "" {
						w.Header().Add("X-Tokens-Used", part)
					}
				}
			}), httplimit.Limit(lim, httplimit.Global(), httplimit.WithChargeFromHeader("X-Tokens-Used")),
				httplimit.WithCost(peekCost), httplimit.WithLogger(slogTo(&logs)))
			if r := get(t, srv.URL); r.StatusCode != 200 {
				t.Fatalf("status %d, want 200", r.StatusCode)
			}
			if got := peek(t, lim, "global"); got != 10 {
				t.Fatalf("remaining %d, want 10: nothing charged", got)
			}
			bad := strings.Contains(logs.String(), "usage cannot be read")
			if want := v != ""; bad != want {
				t.Fatalf("logged a bad value: %v, want %v; log: %s", bad, want, logs.String())
			}
		})
	}
}

// The usage may come as a trailer, after the body: declared, or named with
// http.TrailerPrefix.
func TestChargeFromTrailer(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
	}{
		{"declared", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "X-Tokens-Used")
			w.(http.Flusher).Flush()
			io.WriteString(w, "streamed")
			w.Header().Set("X-Tokens-Used", "4")
		}},
		{"prefixed", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "streamed")
			w.(http.Flusher).Flush()
			w.Header().Set(http.TrailerPrefix+"X-Tokens-Used", "4")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, _ := fakeStore()
			lim := newLimiter(t, store, sluice.Policy{Name: "tokens", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute})
			srv := serveHandler(t, tc.h, httplimit.Limit(lim, httplimit.Global(), httplimit.WithChargeFromHeader("X-Tokens-Used")),
				httplimit.WithCost(peekCost))
			r := get(t, srv.URL)
			if r.Trailer.Get("X-Tokens-Used") != "4" {
				t.Fatalf("trailer %q, want 4", r.Trailer)
			}
			if got := peek(t, lim, "global"); got != 6 {
				t.Fatalf("remaining %d, want 6", got)
			}
		})
	}
}

// A client that goes away before the handler ends is charged anyway.
func TestChargeFromHeaderClientGone(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "tokens", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute})
	started := make(chan struct{})
	srv := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done() // the client went away while the work went on
		w.Header().Set("X-Tokens-Used", "15")
	}), httplimit.Limit(lim, httplimit.Global(), httplimit.WithChargeFromHeader("X-Tokens-Used")),
		httplimit.WithCost(peekCost))

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	done := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the request succeeded; want it cancelled")
	}
	testwait.Until(t, "the gone client's usage is charged", func() bool { return left(t, lim, "global") == -5 })
}

// WithChargeFunc sees the status and the header; a streaming handler still
// finds its Flusher and ResponseController.
func TestChargeFunc(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "bytes", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Minute})
	var logs syncBuffer
	srv := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("fail") {
			http.Error(w, "no", http.StatusBadGateway)
			return
		}
		if r.URL.Query().Has("negative") {
			w.Header().Set("X-Negative", "1")
		}
		if _, ok := w.(http.Flusher); !ok {
			t.Error("the handler's writer is no http.Flusher")
		}
		if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("ResponseController: %v", err)
		}
		io.WriteString(w, "twelve bytes")
	}), httplimit.Limit(lim, httplimit.Global(), httplimit.WithChargeFunc(func(r *http.Request, status int, h http.Header) int64 {
		if h.Get("X-Negative") != "" {
			return -3
		}
		if status != http.StatusOK {
			return 0 // failures are free
		}
		return 12
	})), httplimit.WithCost(peekCost), httplimit.WithLogger(slogTo(&logs)))

	get(t, srv.URL)
	if got := peek(t, lim, "global"); got != 88 {
		t.Fatalf("after a 200: remaining %d, want 88", got)
	}
	if r := get(t, srv.URL+"?fail"); r.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", r.StatusCode)
	}
	get(t, srv.URL+"?negative")
	if got := peek(t, lim, "global"); got != 88 {
		t.Fatalf("after a 502 and a negative usage: remaining %d, want 88", got)
	}
	if !strings.Contains(logs.String(), "usage cannot be read") {
		t.Fatalf("the negative usage was not logged: %s", logs.String())
	}
}

func TestChargeRefusesConcurrency(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "inflight", Algorithm: sluice.Concurrency, Limit: 2, Period: time.Minute})
	_, err := httplimit.New(httplimit.Limit(lim, httplimit.Global(), httplimit.WithChargeFromHeader("X-Tokens-Used")))
	if err == nil || !strings.Contains(err.Error(), "cannot be charged") {
		t.Fatalf("New: %v, want a concurrency limit refused", err)
	}
}

// left returns what key has left under l, negative while it owes units: a
// charge of 0 records nothing and reports it.
func left(t testing.TB, l *sluice.Limiter, key string) int64 {
	t.Helper()
	res, err := l.Charge(context.Background(), key, 0)
	if err != nil {
		t.Fatal(err)
	}
	return res.Remaining
}
