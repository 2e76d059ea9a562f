package lab

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/fairshare"
	"github.com/sluicehq/sluice/internal/observe"
	"github.com/sluicehq/sluice/internal/storestack"
)

// TenantShare is one tenant's part of a fairness row, in units per period
// over the measured half of the run.
type TenantShare struct {
	Tenant string `json:"tenant"`
	// Demand is what the tenant offered.
	Demand float64 `json:"demand"`
	// FairShare is its weighted max-min fair share of the limit (equal
	// weights) given every tenant's demand.
	FairShare float64 `json:"fair_share"`
	// Admitted is what it was admitted.
	Admitted float64 `json:"admitted"`
}

// fairnessDemands returns what each of t tenants offers per period of a
// limit l: the first 100× an equal share, the others from a quarter to
// one and a half of it, so some ask less than their fair share and some
// more.
func fairnessDemands(l int64, t int) []float64 {
	equal := float64(l) / float64(t)
	out := []float64{100 * equal}
	for i := 1; i < t; i++ {
		f := 1.5
		if t > 2 {
			f = 0.25 + 1.25*float64(i-1)/float64(t-2)
		}
		out = append(out, f*equal)
	}
	return out
}

// tenantArrival is one request of a tenant at a node.
type tenantArrival struct {
	arrival
	tenant int
}

// fairnessTraffic spaces each tenant's demand evenly over the run and deals
// each tenant's requests round-robin to the nodes.
func fairnessTraffic(start, period int64, demands []float64, nodes, windows int) []tenantArrival {
	var out []tenantArrival
	end := start + int64(windows)*period
	for i, d := range demands {
		gap := float64(period) / d
		// Tenants start a little apart, so they do not all ask at once.
		for k := 0; ; k++ {
			t := start + int64(gap*(float64(k)+float64(i+1)/float64(len(demands)+1)))
			if t >= end {
				break
			}
			out = append(out, tenantArrival{arrival{t: t, node: k % nodes}, i})
		}
	}
	slices.SortStableFunc(out, func(a, b tenantArrival) int { return int(a.t - b.t) })
	return out
}

// runFairness offers tenants of different demands — one of them 100× its
// share — to one limit, and compares one global limit (first come, first
// served) with Sluice's fair share, over the second half of the run: each
// tenant's admitted rate against its max-min fair share, utilization and
// the most admitted in one window.
func runFairness(ctx context.Context, e *env) (*Report, error) {
	o := e.opts
	period := micros(o.Period)
	start := virtualStart(period)
	windows := max(2*o.Windows, 20)
	demands := fairnessDemands(o.Limit, o.Tenants)
	traffic := fairnessTraffic(start, period, demands, o.Nodes, windows)
	claims := make([]fairshare.Claim, len(demands))
	for i, d := range demands {
		claims[i] = fairshare.Claim{Demand: d}
	}
	fair := fairshare.Allocate(float64(o.Limit), claims, false)
	p := &config.Policy{Policy: sluice.Policy{Name: "lab-fairness", Algorithm: sluice.FixedWindow, Limit: o.Limit, Period: o.Period}}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r := &Report{Span: spanAligned + ", bound L"}
	for _, share := range []bool{false, true} {
		clock := newVClock(start)
		name := "fairness-naive"
		q := *p
		if share {
			name, q.FairShare, q.ShareInterval = "fairness-share", true, o.Period/4
		}
		st := e.store(name, clock)
		engines := make([]*engine.Engine, o.Nodes)
		for i := range engines {
			obs := observe.New("lab", slog.New(slog.DiscardHandler), nil)
			engines[i] = engine.New(storestack.Of(st), obs, nil, engine.WithClock(clock), engine.WithNode(fmt.Sprint("node-", i)))
		}
		admitted := make([][]int64, len(demands))
		var all []int64
		res := make([]sluice.Result, 1)
		for _, a := range traffic {
			clock.set(a.t)
			// Shares change at the virtual times they are due, every node's
			// in turn, not whenever a background recomputation gets to run.
			for _, e := range engines {
				e.Shares().Recompute()
			}
			key := "all" // one global limit
			if share {
				key = fmt.Sprint("tenant-", a.tenant)
			}
			ok, err := engines[a.node].Decide(ctx, []engine.Check{{Policy: &q, Key: key, Cost: 1}}, res)
			if err != nil {
				return nil, err
			}
			if ok {
				admitted[a.tenant] = append(admitted[a.tenant], a.t)
				all = append(all, a.t)
			}
		}
		r.Rows = append(r.Rows, fairnessRow(share, o, start+int64(windows/2)*period, windows-windows/2, traffic, demands, fair, admitted, all))
	}
	naive, sluiceRow := r.Rows[0], r.Rows[1]
	r.Summary = fmt.Sprintf("With one tenant offering 100× its share, one global limit left the others %.2f of their fair share at worst and the heavy one %.0f%% of the limit; fair share gave every other tenant at least %.3f of its fair share at utilization %.3f and overshoot %.3f.",
		*naive.MinShareRatio, 100**naive.HeaviestShare, *sluiceRow.MinShareRatio, *sluiceRow.Utilization, sluiceRow.Overshoot)
	return r, nil
}

// fairnessRow measures one variant over the measured periods from `from`.
func fairnessRow(share bool, o Options, from int64, periods int, traffic []tenantArrival, demands, fair []float64, admitted [][]int64, all []int64) Row {
	variant := "naive: one global limit"
	if share {
		variant = "sluice: fair share"
	}
	var total int64
	for _, ts := range admitted {
		total += int64(len(ts))
	}
	row := newRow(sluice.FixedWindow, variant, o.Nodes, int64(len(traffic)), total, maxAligned(all, micros(o.Period)), o.Limit)
	row.Naive = !share
	perPeriod := func(ts []int64) float64 {
		n := 0
		for _, t := range ts {
			if t >= from {
				n++
			}
		}
		return float64(n) / float64(periods)
	}
	minRatio, used := 1e9, 0.0
	for i := range demands {
		a := perPeriod(admitted[i])
		used += a
		row.Tenants = append(row.Tenants, TenantShare{Tenant: fmt.Sprint("tenant-", i), Demand: demands[i], FairShare: fair[i], Admitted: a})
		if i > 0 { // the heaviest is tenant 0
			minRatio = min(minRatio, a/fair[i])
		}
	}
	utilization := used / float64(o.Limit)
	heaviest := row.Tenants[0].Admitted / float64(o.Limit)
	row.MinShareRatio, row.Utilization, row.HeaviestShare = &minRatio, &utilization, &heaviest
	return row
}
