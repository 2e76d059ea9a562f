package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// TestMemoryPerKey measures what one key's state costs in Redis, per
// algorithm: 100,000 keys with one admitted decision each on a fresh
// redis-server, then MEMORY USAGE of 100 of them and the used_memory growth
// divided by the keys. It takes ~20 s, so it runs only with SLUICE_MEMUSAGE=1:
//
//	SLUICE_MEMUSAGE=1 go test -count=1 -run TestMemoryPerKey -v ./redisstore/
//
// The policy (100 per day: a bucket key lives T = 864 s after one admission)
// keeps every key alive during the measurement; a sliding_log key then holds
// one entry (one admission).
func TestMemoryPerKey(t *testing.T) {
	if os.Getenv("SLUICE_MEMUSAGE") != "1" {
		t.Skip("set SLUICE_MEMUSAGE=1 to measure Redis memory per key")
	}
	const (
		nKeys   = 100_000
		samples = 100
		workers = 64
	)
	algs := []sluice.Algorithm{sluice.FixedWindow, sluice.SlidingWindow, sluice.SlidingLog,
		sluice.TokenBucket, sluice.LeakyBucket, sluice.GCRA}
	var table strings.Builder
	table.WriteString("| algorithm | Redis type | keys in Redis | MEMORY USAGE (avg of 100) | used_memory delta / key |\n|---|---|---|---|---|\n")
	for _, alg := range algs {
		t.Run(string(alg), func(t *testing.T) {
			srv := redistest.Start(t)
			st, err := redisstore.Open(srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			p := sluice.Policy{Name: "mem", Algorithm: alg, Limit: 100, Period: 24 * time.Hour}
			l, err := sluice.New(st, p)
			if err != nil {
				t.Fatal(err)
			}
			c := newClient(t, srv.URL())
			ctx := context.Background()
			// Load the script and fill the connection before the baseline.
			if _, err := l.AllowN(ctx, "warm", 1); err != nil {
				t.Fatal(err)
			}
			before := usedMemory(t, c)

			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < nKeys; i += workers {
						r, err := l.AllowN(ctx, "user:"+strconv.Itoa(i), 1)
						if err == nil && !r.Allowed {
							err = fmt.Errorf("key %d denied", i)
						}
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			after := usedMemory(t, c)

			dbsize, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			var sum int64
			for i := range samples {
				k := st.Key(&p, "user:"+strconv.Itoa(i*(nKeys/samples)))
				n, err := c.Do(ctx, c.B().MemoryUsage().Key(k).Samples(0).Build()).AsInt64()
				if err != nil {
					t.Fatalf("MEMORY USAGE %s: %v", k, err)
				}
				sum += n
			}
			typ, err := c.Do(ctx, c.B().Type().Key(st.Key(&p, "user:0")).Build()).ToString()
			if err != nil {
				t.Fatal(err)
			}
			usage := float64(sum) / samples
			delta := float64(after-before) / nKeys
			name := string(alg)
			if alg == sluice.SlidingLog {
				name += " (1 entry)"
			}
			fmt.Fprintf(&table, "| %s | %s | %d | %.1f B | %.1f B |\n", name, typ, dbsize-1, usage, delta)
			t.Logf("%s: %d keys, MEMORY USAGE %.1f B, used_memory delta %.1f B/key", alg, dbsize-1, usage, delta)
		})
	}
	t.Log("\n" + table.String())
}

// usedMemory returns INFO memory's used_memory.
func usedMemory(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("memory").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}
