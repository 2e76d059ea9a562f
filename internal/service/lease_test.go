package service

import (
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestOpenStoreLease: with store.lease, decisions come from leased quota —
// far fewer script calls reach Redis than requests are decided — and
// closing the store gives the unused quota back.
func TestOpenStoreLease(t *testing.T) {
	srv := redistest.Start(t)
	st, closeStore, err := OpenStore(config.Store{URL: srv.URL(), Lease: &config.Lease{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1000, Period: 60_000_000_000} // per minute
	l, err := sluice.New(st, p)
	if err != nil {
		t.Fatal(err)
	}
	const requests = 200
	for i := range requests {
		res, err := l.Allow(context.Background(), "k")
		if err != nil || !res.Allowed {
			t.Fatalf("request %d: %+v %v", i, res, err)
		}
	}
	calls := evalCalls(t, srv)
	t.Logf("%d script calls for %d requests", calls, requests)
	if calls > requests/2 {
		t.Errorf("%d script calls for %d requests: leases are not used", calls, requests)
	}
	closeStore()
	// What is left in Redis is the capacity less what was admitted (a bit
	// more, as the minute goes on): nothing stays leased after close.
	direct, closeDirect, err := OpenStore(config.Store{URL: srv.URL()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDirect()
	peek, err := direct.Decide(context.Background(), sluice.Request{Policy: &p, Key: "k"})
	if err != nil || peek.Remaining < p.Limit-requests {
		t.Errorf("after close Redis has %d left (%v), want at least %d", peek.Remaining, err, p.Limit-requests)
	}
}

// evalCalls counts the FCALL, EVALSHA and EVAL calls Redis has served.
func evalCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	info, err := srv.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range regexp.MustCompile(`cmdstat_(?:evalsha|eval|fcall):calls=(\d+)`).FindAllStringSubmatch(info, -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	if n == 0 {
		t.Fatalf("no script calls in INFO commandstats:\n%s", info)
	}
	return n
}

// TestSameStoreLease: a reload of an unchanged store.lease is no store
// change (each load allocates the section afresh); a changed one is.
func TestSameStoreLease(t *testing.T) {
	a := config.Store{URL: "redis://r:6379", Lease: &config.Lease{TTL: 1}}
	b := config.Store{URL: "redis://r:6379", Lease: &config.Lease{TTL: 1}}
	if !sameStore(a, b) {
		t.Error("equal lease sections: a store change")
	}
	for _, l := range []*config.Lease{nil, {TTL: 2}, {Off: true}} {
		b.Lease = l
		if sameStore(a, b) {
			t.Errorf("lease %+v against %+v: no store change", l, a.Lease)
		}
	}
}
