package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// TestRestartNoDeadConnection: decisions made one at a time — so each of the
// client's connections is used by one call at a time — then Redis restarts:
// every decision after the restart is decided, none is sent down a
// connection the old server closed (that one failed with EOF).
func TestRestartNoDeadConnection(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	st, err := redisstore.Open(srv.URL(), redisstore.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p := &sluice.Policy{Name: "restart", Algorithm: sluice.GCRA, Limit: 1000, Period: time.Minute}
	single := func(i int) error {
		_, err := st.Decide(context.Background(), sluice.Request{Policy: p, Key: "k", Cost: 1})
		return err
	}
	batch := func(i int) error {
		reqs := []sluice.Request{{Policy: p, Key: "a", Cost: 1}, {Policy: p, Key: "b", Cost: 1}}
		return st.DecideAll(context.Background(), reqs, make([]sluice.Result, 2))
	}
	// rueidis spreads calls over its connections at random: 40 calls use
	// each of its 4 all but surely.
	for round := range 2 {
		for _, call := range []func(int) error{single, batch} {
			for i := range 40 {
				if err := call(i); err != nil {
					t.Fatalf("round %d, before the restart: %v", round, err)
				}
			}
		}
		srv.Restart()
		failed := 0
		for _, call := range []func(int) error{single, batch} {
			for i := range 40 {
				if err := call(i); err != nil {
					failed++
					t.Errorf("round %d, call %d after the restart: %v", round, i, err)
				}
			}
		}
		if failed > 0 {
			t.Fatalf("round %d: %d of 80 decisions after the restart failed", round, failed)
		}
	}
}
