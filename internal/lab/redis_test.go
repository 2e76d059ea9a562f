package lab

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// TestRedis runs the scenarios against a real redis-server: Sluice's Redis
// store (virtual time through WithClock where the scenario is in virtual
// time, server time for race and skew) and real GET/SET/INCRBY for the naive
// variants.
func TestRedis(t *testing.T) {
	url := redistest.Start(t).URL()
	t.Run("boundary", func(t *testing.T) { checkBoundary(t, url) })
	t.Run("nodes", func(t *testing.T) { checkNodes(t, url) })
	t.Run("race", func(t *testing.T) { checkRace(t, url) })
	t.Run("stale-cache", func(t *testing.T) { checkStaleCache(t, url) })
	// Real time: 200ms windows, three bursts, about 1.5 s. A small limit
	// keeps each burst well inside the skew interval even under -race.
	t.Run("skew", func(t *testing.T) { checkSkew(t, url, Options{Limit: 20}) })
	t.Run("accuracy", func(t *testing.T) { checkAccuracy(t, url, Options{Sources: 300, Windows: 2}) })
	t.Run("same-as-memory", func(t *testing.T) { checkSameAsMemory(t, url) })
	t.Run("keys-outlive-the-run", func(t *testing.T) { checkKeysOutliveRun(t, url) })
	t.Run("fairness", func(t *testing.T) { checkFairnessRedis(t, url) })
	t.Run("usage", func(t *testing.T) { checkUsageRedis(t, url) })
}

// checkFairnessRedis: four nodes sharing fair share's demand board on Redis
// get exactly the shares they get in memory (virtual time decides), and
// fair share serves the light tenants one global limit starves.
func checkFairnessRedis(t *testing.T, url string) {
	o := Options{Limit: 20, Tenants: 4}
	m := run(t, Fairness, o)
	o.Store = url
	r := run(t, Fairness, o)
	for i := range m.Rows {
		a, b := m.Rows[i], r.Rows[i]
		if a.Variant != b.Variant || a.Sent != b.Sent || a.Admitted != b.Admitted || *a.MinShareRatio != *b.MinShareRatio {
			t.Errorf("%s: memory admitted %d, min_share_ratio %.3f; Redis %d, %.3f", a.Variant, a.Admitted, *a.MinShareRatio, b.Admitted, *b.MinShareRatio)
		}
	}
	if naive, fair := r.Rows[0], r.Rows[1]; *fair.MinShareRatio < 0.9 || *naive.MinShareRatio > 0.5 || fair.Overshoot > 1 {
		t.Errorf("on Redis: fair share min_share_ratio %.3f overshoot %.3f, one global limit %.3f", *fair.MinShareRatio, fair.Overshoot, *naive.MinShareRatio)
	}
}

// checkUsageRedis: the usage scenario shows the same on Redis, with exactly
// the numbers of the memory store (virtual time decides, leases included).
func checkUsageRedis(t *testing.T, url string) {
	m, r := checkUsage(t, "memory://"), checkUsage(t, url)
	for i := range m.Rows {
		a, b := m.Rows[i], r.Rows[i]
		if a.Admitted != b.Admitted || a.MaxInSpan != b.MaxInSpan {
			t.Errorf("%s: memory admitted %d, most %d; Redis %d, %d", a.Variant, a.Admitted, a.MaxInSpan, b.Admitted, b.MaxInSpan)
		}
	}
}

// checkSameAsMemory: a virtual-time scenario gives on Redis exactly the
// numbers it gives in memory, however fast or slow the machine runs it —
// virtual time alone decides, and no key expires in real time before its
// virtual reset.
func checkSameAsMemory(t *testing.T, url string) {
	o := Options{Sources: 300, Windows: 2}
	for _, s := range []string{Boundary, Nodes, StaleCache, Accuracy} {
		mo, ro := o, o
		ro.Store = url
		m, r := run(t, s, mo), run(t, s, ro)
		if len(m.Rows) != len(r.Rows) {
			t.Fatalf("%s: %d rows in memory, %d on Redis", s, len(m.Rows), len(r.Rows))
		}
		for i := range m.Rows {
			a, b := m.Rows[i], r.Rows[i]
			if a.Variant != b.Variant || a.Sent != b.Sent || a.Admitted != b.Admitted || a.MaxInSpan != b.MaxInSpan {
				t.Errorf("%s %s: memory sent %d admitted %d max %d; Redis %s sent %d admitted %d max %d",
					s, a.Variant, a.Sent, a.Admitted, a.MaxInSpan, b.Variant, b.Sent, b.Admitted, b.MaxInSpan)
			}
		}
	}
}

// checkKeysOutliveRun: a key written at virtual time expires on the server's
// clock no earlier than virtualLead from now, so a run that goes slower than
// virtual time still finds its state. (With virtual time in the past the
// key would carry a TTL of only its ResetAfter, in real time.)
func checkKeysOutliveRun(t *testing.T, url string) {
	ctx := context.Background()
	e, err := newEnv(ctx, Options{Store: url, Limit: 5, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	p, err := e.policy("ttl", sluice.SlidingLog)
	if err != nil {
		t.Fatal(err)
	}
	st := e.store("ttl", newVClock(virtualStart(micros(time.Second))))
	if ok, err := decide(ctx, st, p, "k"); err != nil || !ok {
		t.Fatalf("decide: %v %v", ok, err)
	}
	key := st.(*redisstore.Store).Key(p, "k")
	ttl, err := e.redis.Do(ctx, e.redis.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if min := (virtualLead - time.Hour).Milliseconds(); ttl < min {
		t.Errorf("PTTL %s = %dms, want at least %dms", key, ttl, min)
	}
}
