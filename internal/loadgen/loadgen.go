// Package loadgen is the load generator behind `sluice bench`: it drives a
// rate limiter — Sluice over gRPC or HTTP, any Envoy RLS v3 server, or the
// library on a store directly — from many concurrent workers, and reports
// throughput, latency percentiles and the allowed/denied/error counts.
//
// Each worker calls its Target in a closed loop (the next call starts when the
// previous one returns), so the load is bounded by Concurrency and the target's
// latency, not by an arrival rate. Latencies go into one HDR histogram per
// worker, merged at the end, so recording never contends.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Target is what the workers call: one rate limit decision per Call.
type Target interface {
	// Call asks for one decision on key. A denial is allowed == false with a
	// nil error; err reports a call that produced no decision. Call is called
	// from many goroutines at once.
	Call(ctx context.Context, key string) (allowed bool, err error)
	// Close releases the target's connections. Run does not call it: the
	// caller that opened the target closes it.
	Close()
}

// HotKey is the key a Hot share of the calls go to.
const HotKey = "hot"

// Key distributions (Options.Dist).
const (
	Uniform = "uniform"
	Zipf    = "zipf"
)

// DefaultZipfS is the Zipf exponent a Zipf run takes unless told: with 10,000
// keys the first takes about 15% of the calls, the first ten about half.
const DefaultZipfS = 1.1

// Histogram bounds: latencies are recorded in microseconds from 1µs to 60s
// with 3 significant figures; anything outside is clamped into range rather
// than dropped, so every call counts in the percentiles.
const (
	histMinMicros = 1
	histMaxMicros = 60_000_000
	histSigFigs   = 3
)

// Options configure Run.
type Options struct {
	// Target is called by every worker. Required.
	Target Target
	// Concurrency is the number of workers, each with one call in flight.
	// 0 means 64.
	Concurrency int
	// Duration stops the run this long after it starts; calls in flight then
	// finish and count. 0 means no time limit.
	Duration time.Duration
	// Requests caps the number of calls started; 0 means no cap. With neither
	// Duration nor Requests the run lasts until ctx ends.
	Requests int64
	// Keys is the number of distinct keys, "k0" to "k{Keys-1}", chosen at
	// random as Dist says. 0 means 10000.
	Keys int
	// Dist is how keys are chosen: Uniform (the default, ""), or Zipf —
	// key "k{i}" with probability proportional to 1/(i+1)^ZipfS, so a few
	// keys take most of the calls, as real clients and paths do.
	Dist string
	// ZipfS is Zipf's exponent s, above 1 (0 means DefaultZipfS).
	ZipfS float64
	// Hot is the share of calls (0 to 1) that go to HotKey instead, to load
	// one counter the way a popular client or an attack does.
	Hot float64
	// Seed seeds the workers' random key choice; 0 picks a random seed. Worker
	// i uses (Seed, i), so a given seed repeats the same key sequences.
	Seed uint64
	// Progress, when not nil, receives a one-line progress report every
	// ProgressEvery (default 1s).
	Progress      io.Writer
	ProgressEvery time.Duration
}

// Summary is the outcome of a run. Allowed + Denied + Errors == Requests.
// A failed call is no decision: it counts in Errors and ErrorRate only, never
// in Throughput or the latencies, so a target that is down reports no
// throughput rather than the rate at which it refused connections.
type Summary struct {
	// Requests is the number of calls that completed and were counted. Calls
	// cut short because ctx ended are not counted: they measured nothing.
	Requests int64
	Allowed  int64
	Denied   int64
	Errors   int64
	// FirstError is the message of the first failed call, "" if none.
	FirstError string
	// Elapsed runs from the start of the run to the end of its last call.
	Elapsed time.Duration
	// Throughput is the decisions (Allowed + Denied) per second of Elapsed.
	Throughput float64
	// ErrorRate is the failed calls (Errors) per second of Elapsed.
	ErrorRate float64
	// Latency percentiles and extremes of the calls that got a decision; all
	// zero when none did.
	P50, P90, P99, P999 time.Duration
	Min, Max, Mean      time.Duration
}

// Decisions is the number of calls that got a decision: Allowed + Denied.
func (s Summary) Decisions() int64 { return s.Allowed + s.Denied }

// counters are one worker's counts. They are atomics only so the progress
// reporter can read them while the worker runs; each has a single writer, so
// the adds never contend. The padding keeps workers off each other's cache
// lines.
type counters struct {
	allowed, denied, errors atomic.Int64
	_                       [40]byte
}

// Run drives opts.Target until the duration passes, the request cap is
// reached or ctx ends, whichever comes first, and returns the summary. It
// returns an error only for invalid options; failed calls are counted in the
// summary. Every goroutine Run starts has ended when it returns.
func Run(ctx context.Context, opts Options) (Summary, error) {
	if err := opts.normalize(); err != nil {
		return Summary{}, err
	}
	keys := make([]string, opts.Keys)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	seed := opts.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}

	// stop is what workers poll between calls: an atomic load is cheaper than
	// ctx.Err() and lets the duration end the run without cancelling the
	// calls in flight, which would turn them into spurious errors.
	var stop atomic.Bool
	var started atomic.Int64
	var firstErr atomic.Pointer[string]
	counts := make([]counters, opts.Concurrency)
	hists := make([]*hdrhistogram.Histogram, opts.Concurrency)

	start := time.Now()
	var workers sync.WaitGroup
	for w := range opts.Concurrency {
		hist := hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs)
		hists[w] = hist
		c := &counts[w]
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		pick := func() int { return rng.IntN(len(keys)) }
		if opts.Dist == Zipf {
			z := rand.NewZipf(rng, opts.ZipfS, 1, uint64(len(keys)-1))
			pick = func() int { return int(z.Uint64()) }
		}
		workers.Go(func() {
			for !stop.Load() {
				if opts.Requests > 0 && started.Add(1) > opts.Requests {
					stop.Store(true)
					return
				}
				key := HotKey
				if opts.Hot == 0 || rng.Float64() >= opts.Hot {
					key = keys[pick()]
				}
				t0 := time.Now()
				allowed, err := opts.Target.Call(ctx, key)
				lat := time.Since(t0)
				switch {
				case err != nil && ctx.Err() != nil:
					return // cut short by the caller: not a measurement
				case err != nil:
					c.errors.Add(1)
					if firstErr.Load() == nil {
						msg := err.Error()
						firstErr.CompareAndSwap(nil, &msg)
					}
					continue // no decision: its latency is not the limiter's
				case allowed:
					c.allowed.Add(1)
				default:
					c.denied.Add(1)
				}
				us := min(max(int64((lat+time.Microsecond-1)/time.Microsecond), histMinMicros), histMaxMicros)
				_ = hist.RecordValue(us) // in range by construction
			}
		})
	}

	// The stopper turns the deadline and ctx into the stop flag, and reports
	// progress; it ends when the workers have, so nothing outlives Run.
	workersDone := make(chan struct{})
	var stopper sync.WaitGroup
	stopper.Go(func() {
		var deadline <-chan time.Time
		if opts.Duration > 0 {
			t := time.NewTimer(opts.Duration)
			defer t.Stop()
			deadline = t.C
		}
		var tick <-chan time.Time
		if opts.Progress != nil {
			t := time.NewTicker(opts.ProgressEvery)
			defer t.Stop()
			tick = t.C
		}
		var last int64
		lastAt := start
		for {
			select {
			case <-workersDone:
				return
			case <-deadline:
				stop.Store(true)
			case <-ctx.Done():
				stop.Store(true)
			case now := <-tick:
				a, d, e := sum(counts)
				rate := float64(a+d-last) / now.Sub(lastAt).Seconds()
				last, lastAt = a+d, now
				fmt.Fprintf(opts.Progress, "%6.1fs  %d requests  %.0f decisions/s  allowed %d  denied %d  errors %d\n",
					now.Sub(start).Seconds(), a+d+e, rate, a, d, e)
			}
		}
	})
	workers.Wait()
	elapsed := time.Since(start)
	close(workersDone)
	stopper.Wait()

	merged := hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs)
	for _, h := range hists {
		merged.Merge(h)
	}
	s := Summary{Elapsed: elapsed}
	s.Allowed, s.Denied, s.Errors = sum(counts)
	s.Requests = s.Allowed + s.Denied + s.Errors
	if p := firstErr.Load(); p != nil {
		s.FirstError = *p
	}
	if elapsed > 0 {
		s.Throughput = float64(s.Decisions()) / elapsed.Seconds()
		s.ErrorRate = float64(s.Errors) / elapsed.Seconds()
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	if merged.TotalCount() > 0 {
		s.P50, s.P90 = us(merged.ValueAtQuantile(50)), us(merged.ValueAtQuantile(90))
		s.P99, s.P999 = us(merged.ValueAtQuantile(99)), us(merged.ValueAtQuantile(99.9))
		s.Min, s.Max = us(merged.Min()), us(merged.Max())
		s.Mean = time.Duration(merged.Mean() * float64(time.Microsecond))
	}
	return s, nil
}

func sum(counts []counters) (allowed, denied, errs int64) {
	for i := range counts {
		allowed += counts[i].allowed.Load()
		denied += counts[i].denied.Load()
		errs += counts[i].errors.Load()
	}
	return
}

func (o *Options) normalize() error {
	if o.Target == nil {
		return errors.New("loadgen: no target")
	}
	if o.Concurrency == 0 {
		o.Concurrency = 64
	}
	if o.Keys == 0 {
		o.Keys = 10000
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = time.Second
	}
	if o.Dist == "" {
		o.Dist = Uniform
	}
	if o.ZipfS == 0 {
		o.ZipfS = DefaultZipfS
	}
	switch {
	case o.Concurrency < 0:
		return fmt.Errorf("loadgen: concurrency must be at least 1, got %d", o.Concurrency)
	case o.Keys < 0:
		return fmt.Errorf("loadgen: keys must be at least 1, got %d", o.Keys)
	case !(o.Hot >= 0 && o.Hot <= 1): // also rejects NaN
		return fmt.Errorf("loadgen: hot must be between 0 and 1, got %v", o.Hot)
	case o.Dist != Uniform && o.Dist != Zipf:
		return fmt.Errorf("loadgen: keys distribution must be %s or %s, got %q", Uniform, Zipf, o.Dist)
	case !(o.ZipfS > 1 && o.ZipfS <= 100): // also rejects NaN
		return fmt.Errorf("loadgen: the Zipf exponent must be above 1 (and at most 100), got %v", o.ZipfS)
	case o.Duration < 0:
		return fmt.Errorf("loadgen: duration must not be negative, got %v", o.Duration)
	case o.Requests < 0:
		return fmt.Errorf("loadgen: requests must not be negative, got %d", o.Requests)
	}
	return nil
}
