package httplimit_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
)

type shadowLog struct {
	mu  sync.Mutex
	got []httplimit.ShadowDenial
}

func (s *shadowLog) add(_ *http.Request, d httplimit.ShadowDenial) {
	s.mu.Lock()
	s.got = append(s.got, d)
	s.mu.Unlock()
}

func (s *shadowLog) take() []httplimit.ShadowDenial {
	s.mu.Lock()
	defer s.mu.Unlock()
	got := s.got
	s.got = nil
	return got
}

// Requests over a shadow limit pass, are reported with the real decision, and
// the client never hears of the shadow limit.
func TestShadowLimitReportsButNeverDenies(t *testing.T) {
	store, _ := fakeStore()
	global := newLimiter(t, store, sluice.Policy{Name: "global", Algorithm: sluice.GCRA, Limit: 100, Period: time.Minute})
	perIP := newLimiter(t, store, sluice.Policy{Name: "per-ip", Algorithm: sluice.GCRA, Limit: 2, Period: time.Minute})
	var log shadowLog
	srv := serve(t,
		httplimit.Limit(global, httplimit.Global()),
		httplimit.Limit(perIP, httplimit.ByIP(), httplimit.WithShadow()),
		httplimit.WithShadowDenialHandler(log.add),
	)
	for i := 1; i <= 4; i++ {
		r := get(t, srv.URL)
		if r.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d, want 200: shadow limits never deny", i, r.StatusCode)
		}
		wantFields(t, "RateLimit-Policy", parseList(t, r.Header.Values("RateLimit-Policy")), []any{"global", "q", 100, "w", 60})
		got := log.take()
		if i <= 2 {
			if len(got) != 0 {
				t.Fatalf("request %d within the shadow limit reported %+v", i, got)
			}
			continue
		}
		// Two units a minute: the third waits 30 s for the next.
		if len(got) != 1 || got[0].Policy.Name != "per-ip" || got[0].Result.Allowed ||
			got[0].Result.RetryAfter != 30*time.Second || got[0].Denied {
			t.Fatalf("request %d: reported %+v, want per-ip would deny, retry in 30s", i, got)
		}
	}
	if n := peek(t, perIP, "127.0.0.1"); n != 0 {
		t.Fatalf("shadow limit has %d left, want 0", n)
	}
}

// When the enforced limits deny, a shadow limit is only peeked at: it is not
// charged, and reported only if it would have denied too.
func TestShadowLimitNotChargedOnDenial(t *testing.T) {
	store, _ := fakeStore()
	enforced := newLimiter(t, store, sluice.Policy{Name: "enforced", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Minute})
	roomy := newLimiter(t, store, sluice.Policy{Name: "roomy", Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Minute})
	tight := newLimiter(t, store, sluice.Policy{Name: "tight", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Minute})
	var log shadowLog
	srv := serve(t,
		httplimit.Limit(enforced, httplimit.Global()),
		httplimit.Limit(roomy, httplimit.Global(), httplimit.WithShadow()),
		httplimit.Limit(tight, httplimit.Global(), httplimit.WithShadow()),
		httplimit.WithShadowDenialHandler(log.add),
	)
	get(t, srv.URL)
	if got := log.take(); len(got) != 0 {
		t.Fatalf("first request reported %+v", got)
	}
	if r := get(t, srv.URL); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second request: %d", r.StatusCode)
	}
	got := log.take()
	if len(got) != 1 || got[0].Policy.Name != "tight" || !got[0].Denied || got[0].Result.Allowed {
		t.Fatalf("reported %+v, want tight alone, denied anyway", got)
	}
	if n := peek(t, roomy, "global"); n != 4 {
		t.Fatalf("roomy has %d left, want 4: charged for a denied request", n)
	}
}

// WithShadowAll turns enforcement off; the default report is a log line.
func TestShadowAllLogs(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1, Period: time.Minute})
	var log syncBuffer
	srv := serve(t, httplimit.Limit(lim, httplimit.Global()), httplimit.WithShadowAll(), httplimit.WithLogger(slogTo(&log)))
	for i := range 3 {
		if r := get(t, srv.URL); r.StatusCode != http.StatusOK || r.Header.Get("RateLimit") != "" {
			t.Fatalf("request %d: %d %v", i, r.StatusCode, r.Header)
		}
	}
	if n := strings.Count(log.String(), "shadow limit would deny"); n != 2 || !strings.Contains(log.String(), "policy=p") {
		t.Fatalf("log has %d reports, want 2:\n%s", n, log.String())
	}
}
