package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
)

// testTTL: with server time, a written key expires within a millisecond after
// its ResetAfter, never before, and is gone once the state is back to initial.
// The redis-server runs on this machine, so its TIME and time.Now read one
// clock.
func testTTL(t *testing.T, tg rstest.Target) {
	s := tg.New(t)
	for _, a := range sluice.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			p := &sluice.Policy{Name: "ttl", Algorithm: a, Limit: 4, Period: 80 * time.Millisecond}
			req := sluice.Request{Policy: p, Key: "k", Cost: 1}
			key := s.Key(p, req.Key)
			if _, err := s.Decide(ctx, sluice.Request{Policy: p, Key: req.Key}); err != nil {
				t.Fatal(err)
			}
			if when := tg.ExpireTime(t, key); when != -2 {
				t.Fatalf("a peek on a fresh key wrote it (PEXPIRETIME %d)", when)
			}
			var res sluice.Result
			var end int64
			for i := 0; i < 3; i++ {
				before := time.Now().UnixMicro()
				var err error
				if res, err = s.Decide(ctx, req); err != nil || !res.Allowed {
					t.Fatalf("Decide: %+v, %v", res, err)
				}
				after := time.Now().UnixMicro()
				reset := res.ResetAfter.Microseconds()
				when := tg.ExpireTime(t, key)
				if when == -2 {
					// Already gone: right only if its ResetAfter has passed
					// (a decision just before a window's end; a slow machine).
					if now := time.Now().UnixMicro(); now < before+reset {
						t.Fatalf("the key is gone %dµs after the decision, before its ResetAfter %v", now-before, res.ResetAfter)
					}
					continue
				}
				end = (when + 1) * 1000 // gone from this µs on
				// The script ran at some instant in [before, after].
				if end < before+reset {
					t.Fatalf("the key expires %dµs after the decision, before its ResetAfter %v", end-before, res.ResetAfter)
				}
				if end >= after+reset+1000 {
					t.Fatalf("the key expires %dµs after the decision, over 1ms after its ResetAfter %v", end-after, res.ResetAfter)
				}
			}
			time.Sleep(time.Duration(end-time.Now().UnixMicro())*time.Microsecond + 2*time.Millisecond)
			if when := tg.ExpireTime(t, key); when != -2 {
				t.Fatalf("the key is still there after its ResetAfter (PEXPIRETIME %d)", when)
			}
			if r, err := s.Decide(ctx, sluice.Request{Policy: p, Key: req.Key}); err != nil || r.ResetAfter != 0 || r.Remaining != p.Capacity() {
				t.Fatalf("after expiry: %+v, %v: want the initial state", r, err)
			}
		})
	}
}
