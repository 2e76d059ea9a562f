package memory

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// CPUTime returns the CPU time (user and system) the process has used, in ns.
// The benchmarks report it per decision as cpu-ns/op: a machine busy with
// other work stretches ns/op but not that.
func CPUTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkParts takes a decision on one hot key apart: each piece of the
// store's work alone (reading the clock, hashing the policy and key, the
// shard lock, finding the entry, the decision math), then the store's whole
// Decide and the Limiter's AllowN around it. What the pieces do not add up to
// is the store's bookkeeping and the calls between them. Each piece runs
// through a func value, which adds a nanosecond or two to each alike.
//
//	go test -run '^$' -bench Parts -cpu 1 ./memory/
func BenchmarkParts(b *testing.B) {
	s := New()
	p := &sluice.Policy{Name: "bench", Algorithm: sluice.GCRA, Limit: 1000, Period: time.Hour}
	l, err := sluice.New(s, *p)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const key = "user-1"
	if _, err := l.AllowN(ctx, key, 1); err != nil {
		b.Fatal(err)
	}
	var id entryKey
	id.set(p, key)
	h := s.hash(&id)
	sh := &s.shards[h&s.mask]
	var sink int64
	parts := []struct {
		name string
		run  func()
	}{
		{"clock", func() { sink += s.now() }},
		{"hash", func() { var id entryKey; id.set(p, key); sink += int64(s.hash(&id)) }},
		{"lock", func() {
			sh.mu.Lock()
			sink++ // what a decision does under the lock is timed apart
			sh.mu.Unlock()
		}},
		{"find", func() { i, _ := sh.find(h, &id); sink += int64(i) }},
		{"decide", func() { // an admission on a new key's state
			var st sluice.State
			var res sluice.Result
			sluice.DecideInPlace(p, &st, 1e15, 1, &res)
			sink += res.Remaining
		}},
		{"store", func() { s.Decide(ctx, sluice.Request{Policy: p, Key: key, Cost: 1}) }},
		{"limiter", func() { l.AllowN(ctx, key, 1) }},
	}
	for _, part := range parts {
		b.Run(part.name, func(b *testing.B) {
			start := CPUTime(b)
			for b.Loop() {
				part.run()
			}
			b.ReportMetric(float64(CPUTime(b)-start)/float64(b.N), "cpu-ns/op")
		})
	}
}
