package redisstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
)

// newClient connects a rueidis client to url for the length of the test.
func newClient(t testing.TB, url string) rueidis.Client {
	t.Helper()
	o, err := rueidis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	o.DisableCache = true
	c, err := rueidis.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// target returns the rstest Target of a rueidis client.
func target(c rueidis.Client) rstest.Target {
	ctx := context.Background()
	return rstest.Target{
		New: func(t *testing.T, opts ...redisstore.Option) *redisstore.Store {
			return redisstore.New(c, append(rstest.Defaults(), opts...)...)
		},
		ExpireTime: func(t *testing.T, key string) int64 {
			when, err := c.Do(ctx, c.B().Pexpiretime().Key(key).Build()).AsInt64()
			if err != nil {
				t.Fatalf("PEXPIRETIME %q: %v", key, err)
			}
			return when
		},
		FlushScripts: func(t *testing.T) {
			for addr, n := range c.Nodes() {
				if err := n.Do(ctx, n.B().ScriptFlush().Build()).Error(); err != nil {
					t.Errorf("SCRIPT FLUSH on %s: %v", addr, err)
				}
				err := n.Do(ctx, n.B().FunctionFlush().Build()).Error()
				if err != nil && !redisstore.FunctionsRefused(err) && !strings.Contains(err.Error(), "READONLY") {
					t.Errorf("FUNCTION FLUSH on %s: %v", addr, err)
				}
			}
		},
	}
}

// TestSingle runs everything that needs one Redis on one server.
func TestSingle(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.URL())
	tg := target(c)
	t.Run("Conformance", func(t *testing.T) { rstest.Conformance(t, tg) })
	t.Run("Differential", func(t *testing.T) { rstest.Differential(t, tg, 1500, false) })
	t.Run("NoScript", func(t *testing.T) { rstest.NoScript(t, tg) })
	t.Run("TTL", func(t *testing.T) { testTTL(t, tg) })
	t.Run("ClockSkew", func(t *testing.T) { testClockSkew(t, tg) })
	t.Run("Concurrency", func(t *testing.T) { testConcurrency(t, srv.URL()) })
	t.Run("Paths", func(t *testing.T) { testPaths(t, c, false) })
	t.Run("Open", func(t *testing.T) { testOpen(t, srv.URL()) })
	t.Run("Mode", func(t *testing.T) { testModeFunctions(t, srv, c) })
	t.Run("TextState", func(t *testing.T) { testTextState(t, c) })
	t.Run("Coalescing", func(t *testing.T) { testCoalescing(t, c) })
	t.Run("ChargeCoalescing", func(t *testing.T) { testChargeCoalescing(t, c) })
	t.Run("Batch", func(t *testing.T) { testBatch(t, tg.New, false, false) })
	t.Run("LargeSet", func(t *testing.T) { testLargeSet(t, tg.New) })
	t.Run("InFlight", func(t *testing.T) { testInFlightNodes(t, srv.URL()) })
}

// TestCluster runs the same on a three-master Redis Cluster, where
// all-or-nothing checks over keys in different slots take the cross-slot path,
// and once more with a prefix holding a hash tag, which puts every key in one
// slot and so takes the batch script.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	c := newClient(t, cl.URL())
	tg := target(c)
	t.Run("Conformance", func(t *testing.T) { rstest.Conformance(t, tg) })
	t.Run("Differential", func(t *testing.T) { rstest.Differential(t, tg, 1000, false) })
	t.Run("DifferentialOneSlot", func(t *testing.T) { rstest.Differential(t, tg, 500, true) })
	t.Run("NoScript", func(t *testing.T) { rstest.NoScript(t, tg) })
	t.Run("CrossSlotRace", func(t *testing.T) { rstest.CrossSlotRace(t, tg) })
	t.Run("Slots", func(t *testing.T) { testSlots(t, c) })
	t.Run("Nodes", func(t *testing.T) { testNodes(t, cl) })
	t.Run("Paths", func(t *testing.T) { testPaths(t, c, true) })
	t.Run("Open", func(t *testing.T) { testOpen(t, cl.URL()) })
	t.Run("Mode", func(t *testing.T) { testModeCluster(t, cl, c) })
	t.Run("Coalescing", func(t *testing.T) { testCoalescing(t, c) })
	t.Run("ChargeCoalescing", func(t *testing.T) { testChargeCoalescing(t, c) })
	t.Run("Batch", func(t *testing.T) { testBatch(t, tg.New, false, true) })
	t.Run("BatchOneSlot", func(t *testing.T) { testBatch(t, tg.New, true, true) })
	t.Run("LargeSet", func(t *testing.T) { testLargeSet(t, tg.New) })
	t.Run("InFlight", func(t *testing.T) { testInFlightNodes(t, cl.URL()) })
}

// counting wraps a Runner and counts the calls per script.
type counting struct {
	redisstore.Runner
	mu    sync.Mutex
	runs  map[string]int
	multi int
}

func (c *counting) Run(ctx context.Context, s *redisstore.Script, keys, args []string, reply []int64) error {
	c.mu.Lock()
	c.runs[s.Name()]++
	c.mu.Unlock()
	return c.Runner.Run(ctx, s, keys, args, reply)
}

// Partition passes on the Runner's, so that the Store batches as it would
// without the wrapper.
func (c *counting) Partition(key string) (uint64, bool) {
	if p, ok := c.Runner.(redisstore.Partitioner); ok {
		return p.Partition(key)
	}
	return 0, false
}

func (c *counting) RunMulti(ctx context.Context, calls []redisstore.Call) {
	c.mu.Lock()
	c.multi++
	c.mu.Unlock()
	c.Runner.RunMulti(ctx, calls)
}
