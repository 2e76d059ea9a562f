package httplimit_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testwait"
)

// inflightServer serves a handler behind a concurrency limit of 2 (and a
// generous rate limit): the handler holds a request until its release
// channel (named by the X-Hold header) is closed, panics for X-Panic, and
// waits for the client to go for X-Wait-Gone. entered receives each request
// that reached the handler.
type inflightServer struct {
	url     string
	store   sluice.SlotStore
	policy  sluice.Policy
	entered chan string
	mu      sync.Mutex
	holds   map[string]chan struct{}
}

func newInflightServer(t *testing.T) *inflightServer {
	t.Helper()
	store, _ := fakeStore()
	s := &inflightServer{store: store, entered: make(chan string, 16), holds: map[string]chan struct{}{},
		policy: sluice.Policy{Name: "inflight", Algorithm: sluice.Concurrency, Limit: 2, Period: time.Hour}}
	rate := newLimiter(t, store, sluice.Policy{Name: "rate", Algorithm: sluice.FixedWindow, Limit: 1000, Period: time.Hour})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Header.Get("X-Name")
		s.entered <- name
		switch {
		case r.Header.Get("X-Panic") != "":
			panic(http.ErrAbortHandler) // the server recovers it quietly
		case r.Header.Get("X-Wait-Gone") != "":
			<-r.Context().Done()
		default:
			<-s.hold(name)
		}
		w.WriteHeader(http.StatusOK)
	})
	s.url = serveHandler(t, h,
		httplimit.Limit(newLimiter(t, store, s.policy), httplimit.Global()),
		httplimit.Limit(rate, httplimit.Global())).URL
	return s
}

func (s *inflightServer) hold(name string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds[name] == nil {
		s.holds[name] = make(chan struct{})
	}
	return s.holds[name]
}

// release lets the held requests named go on, once.
func (s *inflightServer) release(names ...string) {
	for _, n := range names {
		ch := s.hold(n)
		s.mu.Lock()
		select {
		case <-ch:
		default:
			close(ch)
		}
		s.mu.Unlock()
	}
}

// free reports the slots free now.
func (s *inflightServer) free(t *testing.T) int64 {
	t.Helper()
	r, _, err := s.store.AcquireSlot(context.Background(), sluice.Request{Policy: &s.policy, Key: "global"})
	if err != nil {
		t.Fatal(err)
	}
	return r.Remaining
}

// start sends a request in the background; its status arrives on the
// channel returned (0 when the request failed, as a cancelled one does).
func (s *inflightServer) start(ctx context.Context, name string, header ...string) chan int {
	done := make(chan int, 1)
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url, nil)
	req.Header.Set("X-Name", name)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	return done
}

// waitEntered waits until the requests named reached the handler, in any
// order.
func waitEntered(t *testing.T, s *inflightServer, names ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for range names {
		select {
		case got := <-s.entered:
			if !want[got] {
				t.Fatalf("%s entered, want %v", got, names)
			}
			delete(want, got)
		case <-time.After(30 * time.Second):
			t.Fatalf("%v never reached the handler", want)
		}
	}
}

func waitFree(t *testing.T, s *inflightServer, want int64) {
	t.Helper()
	testwait.Until(t, "slots free", func() bool { return s.free(t) == want })
}

// TestInflightLimit: a concurrency limit admits as many requests at once as
// its limit, holds their slots while the handler runs and gives each back
// when it returns.
func TestInflightLimit(t *testing.T) {
	s := newInflightServer(t)
	ctx := context.Background()
	a, b := s.start(ctx, "a"), s.start(ctx, "b")
	waitEntered(t, s, "a", "b")
	if status := <-s.start(ctx, "c"); status != http.StatusTooManyRequests {
		t.Fatalf("third request in flight: %d, want 429", status)
	}
	// Ended by the test's end, whatever happens before.
	t.Cleanup(func() { s.release("a", "b", "d") })
	s.release("a")
	if status := <-a; status != http.StatusOK {
		t.Fatalf("a: %d", status)
	}
	waitFree(t, s, 1)
	d := s.start(ctx, "d")
	waitEntered(t, s, "d")
	s.release("b")
	s.release("d")
	if sb, sd := <-b, <-d; sb != http.StatusOK || sd != http.StatusOK {
		t.Fatalf("b %d, d %d", sb, sd)
	}
	waitFree(t, s, 2)
}

// TestInflightPanicAndDisconnect: a handler that panics, and a request whose
// client goes away, give their slots back.
func TestInflightPanicAndDisconnect(t *testing.T) {
	s := newInflightServer(t)
	if status := <-s.start(context.Background(), "p", "X-Panic", "1"); status != 0 {
		t.Fatalf("panicking handler answered %d", status)
	}
	waitEntered(t, s, "p")
	waitFree(t, s, 2)

	ctx, cancel := context.WithCancel(context.Background())
	gone := s.start(ctx, "g", "X-Wait-Gone", "1")
	waitEntered(t, s, "g")
	if got := s.free(t); got != 1 {
		t.Fatalf("%d free while g is in flight, want 1", got)
	}
	cancel()
	if status := <-gone; status != 0 {
		t.Fatalf("cancelled request answered %d", status)
	}
	waitFree(t, s, 2)
}

// TestInflightShadow: a shadow concurrency limit never denies, and its slots
// are given back too.
func TestInflightShadow(t *testing.T) {
	store, _ := fakeStore()
	p := sluice.Policy{Name: "shadow", Algorithm: sluice.Concurrency, Limit: 1, Period: time.Hour}
	var denials int
	var mu sync.Mutex
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	srv := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}), httplimit.Limit(newLimiter(t, store, p), httplimit.Global(), httplimit.WithShadow()),
		httplimit.WithShadowDenialHandler(func(*http.Request, httplimit.ShadowDenial) { mu.Lock(); denials++; mu.Unlock() }))
	var wg sync.WaitGroup
	statuses := make(chan int, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(srv.URL)
			if err != nil {
				statuses <- 0
				return
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
		<-entered
	}
	close(release)
	wg.Wait()
	for range 2 {
		if s := <-statuses; s != http.StatusOK {
			t.Fatalf("status %d under a shadow limit", s)
		}
	}
	mu.Lock()
	if denials != 1 {
		t.Errorf("%d shadow denials, want 1", denials)
	}
	mu.Unlock()
	testwait.Until(t, "shadow slot free", func() bool {
		r, _, err := store.AcquireSlot(context.Background(), sluice.Request{Policy: &p, Key: "global"})
		return err == nil && r.Remaining == 1
	})
}
