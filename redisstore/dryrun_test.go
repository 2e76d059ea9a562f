package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/goredis"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
	"github.com/sluicehq/sluice/storetest"
)

// TestDryRunQueued: the dry run of a spread set answers the same whether a
// request goes alone (main.lua's mode 'd') or as a 'd' record of a batch
// (decide_batch, when it queued behind a call in flight), with either
// runner, as functions and as scripts: for every algorithm, on keys in
// states that random admissions left (fresh, partly used, used up, log
// entries leaving the period), costs from a peek to the capacity, sets of
// one algorithm (its batch script) and of all (the mixed one). Both answer
// what sluice.Decide says — the request's Allowed and RetryAfter, a peek's
// Remaining, ResetAfter and Delay — and write nothing: the admissions
// after them still match sluice.Decide.
func TestDryRunQueued(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do("ACL", "SETUSER", "nofunc", "on", ">pw", "~*", "&*", "+@all", "-function", "-fcall", "-fcall_ro"); err != nil {
		t.Fatal(err)
	}
	limited := url.URL{Scheme: "redis", Host: srv.Addr(), User: url.UserPassword("nofunc", "pw")}
	goClient := func(o *redis.Options) *redis.Client {
		c := redis.NewClient(o)
		t.Cleanup(func() { c.Close() })
		return c
	}
	for _, tc := range []struct {
		name string
		mode redisstore.Mode
		open func(opts ...redisstore.Option) *redisstore.Store
	}{
		{"rueidis/functions", redisstore.ModeFunctions, func(opts ...redisstore.Option) *redisstore.Store {
			return redisstore.New(newClient(t, srv.URL()), opts...)
		}},
		{"rueidis/scripts", redisstore.ModeScripts, func(opts ...redisstore.Option) *redisstore.Store {
			return redisstore.New(newClient(t, limited.String()), opts...)
		}},
		{"goredis/functions", redisstore.ModeFunctions, func(opts ...redisstore.Option) *redisstore.Store {
			return goredis.New(goClient(&redis.Options{Addr: srv.Addr()}), opts...)
		}},
		{"goredis/scripts", redisstore.ModeScripts, func(opts ...redisstore.Option) *redisstore.Store {
			return goredis.New(goClient(&redis.Options{Addr: srv.Addr(), Username: "nofunc", Password: "pw"}), opts...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := storetest.NewClock(storetest.Epoch)
			s := tc.open(append(rstest.Defaults(), redisstore.WithClock(clock))...)
			if m, err := s.Mode(context.Background()); err != nil || m != tc.mode {
				t.Fatalf("Mode = %q, %v; want %q", m, err, tc.mode)
			}
			checkDryRuns(t, s, clock)
		})
	}
}

// checkDryRuns drives random admissions on s and, between them, dry runs of
// every key both ways, against sluice.Decide.
func checkDryRuns(t *testing.T, s *redisstore.Store, clock *storetest.Clock) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))
	type target struct {
		p   *sluice.Policy
		key string
	}
	var targets []target
	for _, a := range sluice.Algorithms {
		pols := []*sluice.Policy{
			{Name: "5-per-1s", Algorithm: a, Limit: 5, Period: time.Second},
			{Name: "7-per-100ms", Algorithm: a, Limit: 7, Period: 100 * time.Millisecond},
		}
		if a == sluice.TokenBucket || a == sluice.GCRA || a == sluice.LeakyBucket {
			pols = append(pols, &sluice.Policy{Name: "4-per-1s-burst-9", Algorithm: a, Limit: 4, Period: time.Second, Burst: 9})
		}
		for _, p := range pols {
			for k := range 3 {
				targets = append(targets, target{p, fmt.Sprint("k", k)})
			}
		}
	}
	states := map[target]sluice.State{}
	seen := map[sluice.Algorithm][2]int{} // dry runs denied, admitted
	dryRun := func(round int, tgs []target) {
		t.Helper()
		now := clock.Now().UnixMicro()
		reqs := make([]sluice.Request, len(tgs))
		for i, tg := range tgs {
			reqs[i] = sluice.Request{Policy: tg.p, Key: tg.key, Cost: rng.Int64N(tg.p.Capacity() + 1)}
		}
		alone, queued, err := redisstore.DryRuns(ctx, s, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for i, tg := range tgs {
			_, r := sluice.Decide(tg.p, states[tg], now, reqs[i].Cost)
			_, peek := sluice.Decide(tg.p, states[tg], now, 0)
			allowed := int64(0)
			if r.Allowed {
				allowed = 1
			}
			want := [5]int64{allowed, peek.Remaining, r.RetryAfter.Microseconds(), peek.ResetAfter.Microseconds(), peek.Delay.Microseconds()}
			if queued[i] != alone[i] || alone[i] != want {
				t.Fatalf("round %d, %s %s cost %d: queued %v, alone %v, want %v (sluice.Decide)", round, tg.p.Name, tg.p.Algorithm, reqs[i].Cost, queued[i], alone[i], want)
			}
			n := seen[tg.p.Algorithm]
			n[allowed]++
			seen[tg.p.Algorithm] = n
		}
	}
	for round := range 40 {
		clock.Advance(time.Duration(rng.Int64N(300_000)) * time.Microsecond)
		now := clock.Now().UnixMicro()
		for range 12 {
			tg := targets[rng.IntN(len(targets))]
			cost := rng.Int64N(3)
			got, err := s.Decide(ctx, sluice.Request{Policy: tg.p, Key: tg.key, Cost: cost})
			if err != nil {
				t.Fatal(err)
			}
			next, want := sluice.Decide(tg.p, states[tg], now, cost)
			if got != want {
				t.Fatalf("round %d, %s %s cost %d after the dry runs: %+v, want %+v (sluice.Decide)", round, tg.p.Name, tg.p.Algorithm, cost, got, want)
			}
			if want.Allowed {
				states[tg] = next
			}
		}
		for from := 0; from < len(targets); {
			to := from + 1
			for to < len(targets) && targets[to].p.Algorithm == targets[from].p.Algorithm {
				to++
			}
			dryRun(round, targets[from:to]) // one algorithm: its batch script
			from = to
		}
		dryRun(round, targets) // every algorithm: the mixed batch script
	}
	for _, a := range sluice.Algorithms {
		if n := seen[a]; n[0] == 0 || n[1] == 0 {
			t.Errorf("%s: %d dry runs denied, %d admitted; want both", a, n[0], n[1])
		}
	}
}

// TestSpreadDryRunsQueue: the dry runs of spread sets queue with what their
// nodes already have in flight. With a call held in flight on both shards,
// N concurrent sets of a key on each queue their 2N dry runs there and
// nothing else; once the calls end, each shard's next call carries its N dry
// runs — two calls where a dry run apart made one per key, 2N — and the
// sets get what they would get alone: the one whose key is used up denied,
// with nothing written, the others admitted. Redis served no script call
// that did not go through the queues, and fewer than the 2N+2 calls the dry
// runs apart needed at the least (2N, then the reservations on two shards).
func TestSpreadDryRunsQueue(t *testing.T) {
	const sets = 16
	servers := []*redistest.Server{redistest.Start(t), redistest.Start(t)}
	clients := []rueidis.Client{newClient(t, servers[0].URL()), newClient(t, servers[1].URL())}
	s := shardedTarget(servers, clients).New(t, redisstore.WithClock(storetest.NewClock(storetest.Epoch)))
	ctx := context.Background()
	if m, err := s.Mode(ctx); err != nil || m != redisstore.ModeFunctions {
		t.Fatalf("Mode = %q, %v", m, err)
	}
	// A sliding log on shard 0, GCRA on shard 1: sets mixing algorithms.
	pols := [2]*sluice.Policy{
		{Name: "log", Algorithm: sluice.SlidingLog, Limit: 3, Period: time.Minute},
		{Name: "gcra", Algorithm: sluice.GCRA, Limit: 3, Period: time.Minute},
	}
	var keys [2][]string
	for i := 0; len(keys[0]) < sets || len(keys[1]) < sets; i++ {
		k := fmt.Sprint("k", i)
		for sh, p := range pols {
			if s.ShardOf(p, k) == sh && len(keys[sh]) < sets {
				keys[sh] = append(keys[sh], k)
			}
		}
	}
	// Set 0's key on shard 1 is used up: its dry run denies.
	if r, err := s.Decide(ctx, sluice.Request{Policy: pols[1], Key: keys[1][0], Cost: 3}); err != nil || !r.Allowed {
		t.Fatalf("using up %s: %+v, %v", keys[1][0], r, err)
	}
	fcalls := func() int {
		return calls(t, servers[0], "fcall") + calls(t, servers[1], "fcall")
	}
	var mu sync.Mutex
	made, withDry, dry := 0, 0, 0 // calls the queues made, those with dry runs, the dry runs
	redisstore.OnBatch(s, func(items []redisstore.BatchItem) {
		n := 0
		for _, it := range items {
			if it.Dry {
				n++
			}
		}
		mu.Lock()
		defer mu.Unlock()
		made++
		if n > 0 {
			withDry, dry = withDry+1, dry+n
		}
	})
	releases := []func(){redisstore.HoldQueue(s, pols[0], keys[0][0]), redisstore.HoldQueue(s, pols[1], keys[1][0])}
	released := false
	release := func() {
		if !released {
			released = true
			for _, f := range releases {
				f()
			}
		}
	}
	var wg sync.WaitGroup
	defer func() { release(); wg.Wait() }() // the sets end before the servers, also when the test fails
	results := make([][]sluice.Result, sets)
	for i := range sets {
		results[i] = make([]sluice.Result, 2)
		wg.Go(func() {
			reqs := []sluice.Request{{Policy: pols[0], Key: keys[0][i], Cost: 1}, {Policy: pols[1], Key: keys[1][i], Cost: 1}}
			if err := s.DecideAll(ctx, reqs, results[i]); err != nil {
				t.Error(err)
			}
		})
	}
	// Waiting for goroutines to queue, not for time to pass.
	testwait.Until(t, "the sets' dry runs queued (or anything else)", func() bool {
		dry, others := redisstore.Queued(s)
		return dry == 2*sets || others > 0
	})
	if dry, others := redisstore.Queued(s); dry != 2*sets || others != 0 {
		t.Fatalf("queued behind the calls in flight: %d dry runs and %d other items; want the %d dry runs and nothing else", dry, others, 2*sets)
	}
	before := fcalls()
	release()
	wg.Wait()
	served := fcalls() - before

	for i, res := range results {
		if i == 0 {
			if res[0].Allowed || res[1].Allowed || res[0].RetryAfter <= 0 || res[0].RetryAfter != res[1].RetryAfter ||
				res[0].Remaining != 3 || res[1].Remaining != 0 {
				t.Errorf("set 0, its second key used up: %+v; want denied, the first key untouched (3 left), one RetryAfter", res)
			}
			continue
		}
		if !res[0].Allowed || !res[1].Allowed || res[0].Remaining != 2 || res[1].Remaining != 2 {
			t.Errorf("set %d: %+v; want both admitted, 2 left", i, res)
		}
	}
	if peek, err := s.Decide(ctx, sluice.Request{Policy: pols[0], Key: keys[0][0]}); err != nil || peek.Remaining != 3 {
		t.Errorf("set 0's first key after its denial: %+v, %v; want nothing written (3 left)", peek, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if withDry != 2 || dry != 2*sets {
		t.Errorf("%d dry runs in %d calls; want the %d in 2 calls, one per shard", dry, withDry, 2*sets)
	}
	// made counts the peek above too.
	if served != made-1 || served >= 2*sets+2 {
		t.Errorf("Redis served %d script calls for the %d sets, the queues made %d; want them equal and fewer than %d",
			served, sets, made-1, 2*sets+2)
	}
	t.Logf("%d sets: %d script calls (%d with their dry runs)", sets, served, withDry)
}
