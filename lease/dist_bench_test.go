package lease_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/redisstore"
)

// BenchmarkKeyDistributions: two nodes on one real redis-server, 64 callers,
// with leases off and on, on 10,000 keys chosen uniformly, by Zipf(1.1) (a
// few keys take most calls) and on one hot key; gcra at 10⁹/s, so every
// decision admits. Each run starts cold (a fresh prefix and lease store).
// Reports Redis CPU µs per decision (INFO cpu over the run), the benchmark
// process's own CPU µs per decision (both nodes, getrusage) and store calls
// per decision. Compare off and on within one run, interleaved by rounds:
//
//	go test -run XXX -bench KeyDistributions -benchtime 100000x -count 5 ./lease/
func BenchmarkKeyDistributions(b *testing.B) {
	srv := redistest.Start(b)
	p := sluice.Policy{Name: "dist", Algorithm: sluice.GCRA, Limit: 1_000_000_000, Period: time.Second}
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	var runs atomic.Int64
	for _, dist := range []string{"uniform", "zipf", "hot"} {
		for _, leases := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/leases=%v", dist, leases), func(b *testing.B) {
				// Two nodes, each with a client of its own, as two servers.
				var limiters [2]*sluice.Limiter
				var nodes []*lease.Store
				prefix := fmt.Sprintf("r%d:", runs.Add(1))
				for i := range limiters {
					rs, err := redisstore.Open(srv.URL(), redisstore.WithPrefix(prefix),
						redisstore.WithTimeout(5*time.Second)) // the machine's stalls are not what is measured
					if err != nil {
						b.Fatal(err)
					}
					defer rs.Close()
					var st sluice.Store = rs
					if leases {
						ls := lease.New(rs)
						nodes = append(nodes, ls)
						st = ls
					}
					if limiters[i], err = sluice.New(st, p); err != nil {
						b.Fatal(err)
					}
				}
				var seed atomic.Uint64
				b.SetParallelism(64 / runtime.GOMAXPROCS(0))
				cpu0, self0 := cpuOf(b, srv), selfCPU()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					n := seed.Add(1)
					rng, l := rand.New(rand.NewPCG(n, 7)), limiters[n%2]
					z := rand.NewZipf(rng, 1.1, 1, uint64(len(keys)-1))
					for pb.Next() {
						key := keys[0]
						switch dist {
						case "uniform":
							key = keys[rng.IntN(len(keys))]
						case "zipf":
							key = keys[z.Uint64()]
						}
						if _, err := l.Allow(context.Background(), key); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric((cpuOf(b, srv)-cpu0)*1e6/float64(b.N), "redis-cpu-µs/decision")
				b.ReportMetric((selfCPU()-self0).Seconds()*1e6/float64(b.N), "node-cpu-µs/decision")
				var st lease.Stats
				for _, ls := range nodes {
					s := ls.Stats()
					st.StoreCalls += s.StoreCalls
					st.Decisions += s.Decisions
					if err := ls.Close(); err != nil {
						b.Fatal(err)
					}
				}
				if st.Decisions > 0 {
					b.ReportMetric(float64(st.StoreCalls)/float64(st.Decisions), "calls/decision")
				}
			})
		}
	}
}

func cpuOf(b *testing.B, srv *redistest.Server) float64 {
	cpu, err := srv.CPU()
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// selfCPU is the CPU time (user and system) this process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
