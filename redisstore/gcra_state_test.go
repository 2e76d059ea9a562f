package redisstore_test

import (
	"context"
	"encoding/binary"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/storetest"
)

// TestGCRAReadsBareTAT: a gcra or leaky_bucket key written before the state
// kept its tolerance holds a bare TAT. It is read with the current policy's
// tolerance, as the Go math reads a State whose Count is 0, and an admission
// rewrites it in the current form.
func TestGCRAReadsBareTAT(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.URL())
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Epoch)
	s := redisstore.New(c, redisstore.WithClock(clock), redisstore.WithPrefix("bare:"), redisstore.WithTimeout(5*time.Second))
	now := storetest.Epoch.UnixMicro()
	for _, a := range []sluice.Algorithm{sluice.GCRA, sluice.LeakyBucket} {
		p := &sluice.Policy{Name: "old", Algorithm: a, Limit: 10, Period: time.Second}
		// 1s ahead: an empty bucket. 5s ahead: a clock 4s behind the state.
		for _, ahead := range []int64{1_000_000, 5_000_000} {
			tat := now + ahead
			if err := c.Do(ctx, c.B().Set().Key(s.Key(p, "k")).Value(strconv.FormatInt(tat, 10)).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			_, want := sluice.Decide(p, sluice.State{Time: tat}, now, 1)
			got, err := s.Decide(ctx, sluice.Request{Policy: p, Key: "k", Cost: 1})
			if err != nil {
				t.Fatal(err)
			}
			if got != want || got.RetryAfter != 100*time.Millisecond || got.ResetAfter != time.Second {
				t.Errorf("%s: bare TAT %dµs ahead: got %+v, want %+v (RetryAfter 100ms, ResetAfter 1s)", a, ahead, got, want)
			}
		}
		clock.Advance(time.Hour) // the bucket is full again: admit, in the current form
		if r, err := s.Decide(ctx, sluice.Request{Policy: p, Key: "k", Cost: 1}); err != nil || !r.Allowed {
			t.Fatalf("%s: an hour later: %+v, %v", a, r, err)
		}
		later := clock.Now().UnixMicro()
		v, err := c.Do(ctx, c.B().Get().Key(s.Key(p, "k")).Build()).ToString()
		if err != nil || len(v) != 17 || v[0] != 0 {
			t.Fatalf("%s: stored %q, %v; want a zero byte and two packed doubles (TAT, TOL)", a, v, err)
		}
		tatNow := math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[1:9])))
		tol := math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[9:17])))
		if tatNow != float64(later+100_000) || tol != 1_000_000 {
			t.Errorf("%s: stored TAT %v TOL %v; want %d and 1000000", a, tatNow, tol, later+100_000)
		}
		clock.Set(storetest.Epoch)
	}
}
