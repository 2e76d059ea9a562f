package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memory"
)

// departures records when requests reach the handler.
type departures struct {
	mu    sync.Mutex
	times []time.Time
}

func (d *departures) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	d.times = append(d.times, time.Now())
	d.mu.Unlock()
}

func (d *departures) offsets() []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	slices.SortFunc(d.times, func(a, b time.Time) int { return a.Compare(b) })
	var out []time.Duration
	for _, t := range d.times {
		out = append(out, t.Sub(d.times[0]))
	}
	return out
}

// burst sends n requests at once and waits for all of them.
func burst(t *testing.T, url string, n int) []int {
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := http.Get(url)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			codes[i] = res.StatusCode
		})
	}
	wg.Wait()
	return codes
}

// A leaky bucket of 50 a second (one every 20 ms) passes six simultaneous
// requests to the handler 20 ms apart. The store's clock stands still, so the
// decisions give Delays of exactly 0, 20, …, 100 ms however slowly the
// requests arrive; the waits themselves are real.
func TestLeakyBucketShapesTraffic(t *testing.T) {
	const spacing = 20 * time.Millisecond
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "shaper", Algorithm: sluice.LeakyBucket, Limit: 50, Period: time.Second, Burst: 10})
	var d departures
	srv := serveHandler(t, &d, httplimit.Limit(lim, httplimit.Global()))
	begin := time.Now()
	for i, c := range burst(t, srv.URL, 6) {
		if c != http.StatusOK {
			t.Fatalf("request %d: %d", i, c)
		}
	}
	checkSpacing(t, d.since(begin), spacing)
}

// since returns the departures as offsets from begin, in order.
func (d *departures) since(begin time.Time) []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []time.Duration
	for _, t := range d.times {
		out = append(out, t.Sub(begin))
	}
	slices.Sort(out)
	return out
}

// checkSpacing checks departure offsets from before the burst was sent,
// sorted. Each request was decided after the burst began and waited its
// Delay, and the Delays are 0, spacing, 2·spacing, …: so the k-th departure
// is never earlier than k·spacing (a timer cannot fire early). How much
// later depends on how busy the machine is, so above it is only bounded
// generously: shaping must not hold a request for seconds.
func checkSpacing(t *testing.T, offsets []time.Duration, spacing time.Duration) {
	t.Helper()
	for k, off := range offsets {
		if off < time.Duration(k)*spacing {
			t.Fatalf("departure offsets %v: %d left before %v", offsets, k, time.Duration(k)*spacing)
		}
		if limit := time.Duration(k)*spacing + 10*time.Second; off > limit {
			t.Fatalf("departure offsets %v: %d left after %v", offsets, k, limit)
		}
	}
}

// A Delay beyond WithMaxDelay waits WithMaxDelay, then proceeds.
func TestMaxDelay(t *testing.T) {
	// One unit every 10 s: the second request's Delay is 10 s.
	lim := newLimiter(t, memory.New(), sluice.Policy{Name: "shaper", Algorithm: sluice.LeakyBucket, Limit: 1, Period: 10 * time.Second, Burst: 5})
	srv := serve(t, httplimit.Limit(lim, httplimit.Global()), httplimit.WithMaxDelay(50*time.Millisecond))
	get(t, srv.URL)
	start := time.Now()
	if r := get(t, srv.URL); r.StatusCode != http.StatusOK {
		t.Fatalf("%d", r.StatusCode)
	}
	if took := time.Since(start); took < 50*time.Millisecond || took > 5*time.Second {
		t.Fatalf("the request took %v, want WithMaxDelay (50ms), not its 10s Delay", took)
	}
}

// A request whose context ends while it waits never reaches the handler.
// Its wait (an hour, cut to a minute by WithMaxDelay) outlasts any stall of a
// loaded machine, so only the end of the request can end it in time.
func TestWaitEndsWithTheRequest(t *testing.T) {
	lim := newLimiter(t, memory.New(), sluice.Policy{Name: "shaper", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Hour, Burst: 2})
	var d departures
	done := make(chan struct{}, 2)
	mw, err := httplimit.New(httplimit.Limit(lim, httplimit.Global()), httplimit.WithMaxDelay(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	inner := mw.Handler(&d)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(w, r)
		done <- struct{}{}
	}))
	defer srv.Close()
	get(t, srv.URL) // departs at once; the next waits a minute
	<-done
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("the client got %d before its deadline", res.StatusCode)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the middleware did not return when the request ended")
	}
	// Had the wait not ended with the request, the handler would have run
	// once the wait was up, before the middleware returned.
	if n := len(d.offsets()); n != 1 {
		t.Fatalf("the handler ran %d times, want once", n)
	}
}
