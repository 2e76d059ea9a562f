package lab

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/sluicehq/sluice"
)

// request is one request of accuracy's trace.
type request struct {
	t   int64 // µs, virtual
	src int   // the source, which is also the key
}

// burstyTrace generates the accuracy trace: sources independent clients over
// windows periods, seeded so it can be reproduced. Like real traffic, most
// sources stay well under the limit and a few go over it: 99% send on
// average 1–30% of L per period, 1% send 100–300%. Every source is bursty: it is on
// and off in turns (exponential durations, on P/2 and off P on average) and
// sends its requests as a Poisson stream only while on, at a rate that makes
// its average the one drawn.
func burstyTrace(seed uint64, sources, windows int, start, period, limit int64) []request {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	// Times are drawn as offsets from start, so the trace is the same
	// whatever instant virtual time starts at.
	end := int64(windows) * period
	var out []request
	for src := range sources {
		share := 0.01 + 0.29*rng.Float64()
		if rng.Float64() < 0.01 {
			share = 1 + 2*rng.Float64()
		}
		meanOn, meanOff := float64(period)/2, float64(period)
		// While on, send at the rate that averages share·L per period.
		rate := share * float64(limit) / float64(period) * (meanOn + meanOff) / meanOn
		t := rng.ExpFloat64() * meanOff
		for t < float64(end) {
			on := t + rng.ExpFloat64()*meanOn
			for t += rng.ExpFloat64() / rate; t < on && t < float64(end); t += rng.ExpFloat64() / rate {
				out = append(out, request{t: start + int64(t), src: src})
			}
			t = on + rng.ExpFloat64()*meanOff
		}
	}
	slices.SortStableFunc(out, func(a, b request) int {
		if a.t != b.t {
			return int(a.t - b.t)
		}
		return a.src - b.src
	})
	return out
}

// runAccuracy replays the trace through Sluice's sliding window counter and
// its exact sliding log, and measures the window's error two ways.
//
// Cloudflare's measure (WronglyAllowedPct, WronglyDeniedPct), the one its
// 0.003% is quoted in: every request sent is counted, and a request is
// wrongly allowed when the window's estimate prev·(P−e)/P + cur is within L
// while the exact count of the source's requests in (t−P, t] is over it —
// wrongly denied the other way round.
//
// The limiter's own decisions (DecisionWronglyAllowedPct, …DeniedPct): each
// decision the store made is judged against what an exact limiter would
// have decided on the same history — wrongly allowed if the units that
// algorithm admitted in (t−P, t] already filled L, wrongly denied if one
// more would have fit. This is much stricter: a source held at its limit
// makes every request a close call, and a decision one request late counts
// as an error. The log makes none by either measure.
func runAccuracy(ctx context.Context, e *env) (*Report, error) {
	o := e.opts
	period := micros(o.Period)
	start := virtualStart(period)
	windows := 2 * o.Windows
	trace := burstyTrace(o.Seed, o.Sources, windows, start, period, o.Limit)
	r := &Report{Span: spanSliding + ", per source; bound L"}
	for _, alg := range []sluice.Algorithm{sluice.SlidingLog, sluice.SlidingWindow} {
		p, err := e.policy("lab-accuracy", alg)
		if err != nil {
			return nil, err
		}
		clock := newVClock(start)
		st := e.store("accuracy-"+string(alg), clock)
		admitted := make([][]int64, o.Sources) // per source, in order
		var total, wrongAllow, wrongDeny int64
		for _, q := range trace {
			clock.set(q.t)
			ok, err := decide(ctx, st, p, fmt.Sprint(q.src))
			if err != nil {
				return nil, err
			}
			// The exact decision: units admitted in (t−P, t], plus this one.
			log := admitted[q.src]
			inWindow := len(log) - sortSearch(log, q.t-period)
			exact := int64(inWindow)+1 <= o.Limit
			switch {
			case ok && !exact:
				wrongAllow++
			case !ok && exact:
				wrongDeny++
			}
			if ok {
				admitted[q.src] = append(log, q.t)
				total++
			}
		}
		var worst int64
		for _, log := range admitted {
			worst = max(worst, maxSliding(log, period))
		}
		sent := int64(len(trace))
		row := newRow(alg, string(alg), 1, sent, total, worst, o.Limit)
		row.DecisionWronglyAllowedPct = pct(wrongAllow, sent)
		row.DecisionWronglyDeniedPct = pct(wrongDeny, sent)
		// The log is the exact count, so by Cloudflare's measure it errs
		// never; the window's estimate is judged on the whole trace.
		var a, d int64
		if alg == sluice.SlidingWindow {
			a, d = rateVerdicts(trace, o.Sources, period, o.Limit)
		}
		row.WronglyAllowedPct, row.WronglyDeniedPct = pct(a, sent), pct(d, sent)
		r.Rows = append(r.Rows, row)
	}
	log, win := r.Rows[0], r.Rows[1]
	r.Summary = fmt.Sprintf("On a bursty trace of %d requests from %d sources, the sliding window's estimate wrongly allowed %.3f%% and wrongly denied %.3f%% of requests by Cloudflare's measure (it reports 0.003%% on its traffic); judged decision by decision on the same history it erred on %.3f%% + %.3f%%, and let through %.2f× L in the worst span, where the exact sliding log made no errors and stayed at %.2f×.",
		win.Sent, o.Sources, *win.WronglyAllowedPct, *win.WronglyDeniedPct,
		*win.DecisionWronglyAllowedPct, *win.DecisionWronglyDeniedPct, win.Overshoot, log.Overshoot)
	return r, nil
}

// sortSearch returns the index of the first instant in the ascending log
// that is after t.
func sortSearch(log []int64, t int64) int {
	i, _ := slices.BinarySearch(log, t+1)
	return i
}

// pct returns 100·n/of rounded to four decimals.
func pct(n, of int64) *float64 {
	v := 0.0
	if of > 0 {
		v = math.Round(1e6*float64(n)/float64(of)) / 1e4
	}
	return &v
}

// rateVerdicts counts the requests whose verdict "this source is over L per
// P" differs between the sliding window estimate and the exact count, both
// counting every request sent (Cloudflare's measure): wrongly allowed when
// the estimate is within L and the exact count is not, wrongly denied the
// other way round.
func rateVerdicts(trace []request, sources int, period, limit int64) (allowed, denied int64) {
	type src struct {
		times     []int64
		win       int64
		cur, prev int64
	}
	st := make([]src, sources)
	for _, q := range trace {
		s := &st[q.src]
		w := q.t / period
		switch {
		case w == s.win:
		case w == s.win+1:
			s.prev, s.cur = s.cur, 0
		default:
			s.prev, s.cur = 0, 0
		}
		s.win = w
		s.cur++
		s.times = append(s.times, q.t)
		exact := int64(len(s.times) - sortSearch(s.times, q.t-period))
		e := q.t - w*period
		// est > L  ⇔  prev·(P−e) + cur·P > L·P
		over := s.prev*(period-e)+s.cur*period > limit*period
		switch {
		case !over && exact > limit:
			allowed++
		case over && exact <= limit:
			denied++
		}
	}
	return allowed, denied
}
