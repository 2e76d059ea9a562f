// Package lab is Sluice's overshoot lab: it reproduces, with measured numbers,
// the ways a rate limiter spread over several nodes admits more than its limit,
// and runs Sluice's atomic store through the same traffic for comparison.
//
// Each scenario drives the same traffic through one or more variants and
// reports, per variant, how many units were admitted in the worst span the
// policy promises to bound (Row.MaxInSpan), that promise (Row.Bound) and
// their ratio (Row.Overshoot): above 1 the limit was broken.
//
// The "naive" variants are the designs people write by hand — a counter per
// node, a cached counter synced now and then, GET-then-SET, windows computed
// from each node's own clock. They are written plainly here, unexported, to
// show what NOT to do; nothing in this package is a limiter to use.
//
// Determinism: every scenario except race and Sluice's side of skew on
// Redis runs on a virtual clock that the lab moves itself, with nodes
// simulated as interleaved steps rather than goroutines, so a run gives the
// same numbers every time and takes no wall-clock time. race needs real
// concurrency and skew on Redis needs the real server clock; both are noisy,
// and a slow machine only makes race's naive variant overshoot less and
// Sluice's skew bursts spread out, never admit more.
package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
)

// Scenario names, in the order Scenarios lists them.
const (
	Boundary   = "boundary"
	Nodes      = "nodes"
	StaleCache = "stale-cache"
	Race       = "race"
	Skew       = "skew"
	Accuracy   = "accuracy"
	Hybrid     = "hybrid"
	Fairness   = "fairness"
	Usage      = "usage"
)

// Scenarios lists every scenario Run accepts.
var Scenarios = []string{Boundary, Nodes, StaleCache, Race, Skew, Accuracy, Hybrid, Fairness, Usage}

// Options configures a run. Zero fields take the defaults documented on each.
type Options struct {
	// Store is "memory://" (the default) or a Redis URL (redis://, rediss://,
	// unix://) understood by redisstore.Open. Every run on Redis writes under
	// a fresh key prefix and deletes its keys at the end.
	Store string
	// Nodes is the number of simulated nodes (default 4).
	Nodes int
	// Limit is L, the units a key may have per Period (default 100).
	Limit int64
	// Period is P (default 1s). skew on Redis uses at most 200ms so that its
	// real-time run stays short.
	Period time.Duration
	// Windows is how many periods the virtual-time scenarios run (default 5;
	// accuracy's trace spans twice as many).
	Windows int
	// Sync lists the stale-cache sync intervals S (default 0, 50, 100, 200,
	// 400 and 800ms); 0 means a push and a pull around every request.
	Sync []time.Duration
	// Skew is the largest difference between two nodes' clocks in the skew
	// scenario (default 30ms); it must be below Period/2.
	Skew time.Duration
	// Rounds is how many times race repeats its contest (default 5).
	Rounds int
	// Sources is the number of independent keys in accuracy's trace
	// (default 1000).
	Sources int
	// Seed seeds accuracy's trace generator and usage's costs (default 1), so a trace can be
	// reproduced exactly.
	Seed uint64
	// Tenants is how many tenants share fairness's limit (default 5).
	Tenants int
}

// Report is the outcome of one scenario.
type Report struct {
	// Scenario is the scenario's name.
	Scenario string `json:"scenario"`
	// Rows has one row per variant (stale-cache: per variant and interval).
	Rows []Row `json:"rows"`
	// Store is the store URL the run used.
	Store string `json:"-"`
	// Span says which spans MaxInSpan was taken over, for the table's footer.
	Span string `json:"-"`
	// Summary is one sentence saying what the measured numbers show.
	Summary string `json:"-"`
}

// Row is one variant's measurement.
type Row struct {
	// Variant names what was measured; naive variants start with "naive".
	Variant string `json:"variant"`
	// Nodes is how many nodes sent the traffic.
	Nodes int `json:"nodes"`
	// Sent is the number of requests (each of cost 1).
	Sent int64 `json:"sent"`
	// Admitted is how many of them were admitted.
	Admitted int64 `json:"admitted"`
	// MaxInSpan is the most admitted within one span of the kind the
	// scenario measures (Report.Span; see docs/lab.md).
	MaxInSpan int64 `json:"max_in_span"`
	// Bound is what the policy promises for such a span: L, or B + L for the
	// bucket algorithms over a span of length P.
	Bound int64 `json:"bound"`
	// Overshoot is MaxInSpan / Bound: above 1 the promise was broken.
	Overshoot float64 `json:"overshoot"`
	// WronglyAllowedPct (accuracy only) is the percentage of requests the
	// algorithm's count let pass although the exact count of requests in
	// the last period was over L — Cloudflare's measure (see docs/lab.md).
	WronglyAllowedPct *float64 `json:"wrongly_allowed_pct,omitempty"`
	// WronglyDeniedPct (accuracy only) is the percentage of requests the
	// algorithm's count held over L although the exact count was within it.
	WronglyDeniedPct *float64 `json:"wrongly_denied_pct,omitempty"`
	// DecisionWronglyAllowedPct (accuracy only) is the percentage of
	// requests the store admitted that an exact limiter would have denied
	// given the same admitted history.
	DecisionWronglyAllowedPct *float64 `json:"decision_wrongly_allowed_pct,omitempty"`
	// DecisionWronglyDeniedPct (accuracy only) is the percentage of
	// requests the store denied that an exact limiter would have admitted
	// given the same admitted history.
	DecisionWronglyDeniedPct *float64 `json:"decision_wrongly_denied_pct,omitempty"`
	// ProvenBound (hybrid, leases only) is the overshoot the leases are
	// proven never to exceed (lease.Store.Bound).
	ProvenBound *float64 `json:"proven_bound,omitempty"`
	// StoreCallsPerDecision (hybrid only) is the shared store's calls per
	// request decided.
	StoreCallsPerDecision *float64 `json:"store_calls_per_decision,omitempty"`
	// Utilization (hybrid) is admitted ÷ the most the policy admits over
	// the run, with demand at twice the limit; (fairness) admitted per
	// period ÷ L over the measured half.
	Utilization *float64 `json:"utilization,omitempty"`
	// MinShareRatio (fairness only) is the smallest admitted ÷ max-min fair
	// share among the tenants other than the heaviest.
	MinShareRatio *float64 `json:"min_share_ratio,omitempty"`
	// HeaviestShare (fairness only) is the heaviest tenant's admitted ÷ L.
	HeaviestShare *float64 `json:"heaviest_share,omitempty"`
	// Tenants (fairness only) is each tenant's demand, fair share and
	// admitted rate.
	Tenants []TenantShare `json:"tenants,omitempty"`
	// Used (usage, budget rows) is the units the admitted requests' responses
	// really used; Charged is what the limiter recorded of them.
	Used    *int64 `json:"used,omitempty"`
	Charged *int64 `json:"charged,omitempty"`
	// InFlightBound (usage, budget rows) is the most a window may use when
	// each request is checked before and charged after its response:
	// L + N·(the largest cost) − 1, one request in flight per node
	// (docs/semantics.md, "The worst case of check, then charge").
	InFlightBound *int64 `json:"in_flight_bound,omitempty"`
	// LeakedSlots (usage, slot rows) is how many of the L slots no live
	// node could use once a lease and a request had passed since a node
	// died holding slots.
	LeakedSlots *int64 `json:"leaked_slots,omitempty"`
	// Algorithm is the algorithm whose promise the row is measured against:
	// the one Sluice decides with, or, for a naive design, the one it
	// imitates (every naive design here is a fixed-window counter).
	Algorithm sluice.Algorithm `json:"-"`
	// Naive marks the variants that show what not to do.
	Naive bool `json:"-"`
	// Sync is the stale-cache sync interval of a naive row, for the plot.
	Sync time.Duration `json:"-"`
}

func newRow(alg sluice.Algorithm, variant string, nodes int, sent, admitted, maxInSpan, bound int64) Row {
	return Row{
		Variant: variant, Algorithm: alg, Nodes: nodes, Sent: sent, Admitted: admitted,
		MaxInSpan: maxInSpan, Bound: bound,
		Overshoot: float64(maxInSpan) / float64(bound),
	}
}

func (o Options) withDefaults() Options {
	if o.Store == "" {
		o.Store = "memory://"
	}
	if o.Nodes == 0 {
		o.Nodes = 4
	}
	if o.Limit == 0 {
		o.Limit = 100
	}
	if o.Period == 0 {
		o.Period = time.Second
	}
	if o.Windows == 0 {
		o.Windows = 5
	}
	if o.Sync == nil {
		o.Sync = []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond,
			200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
	}
	if o.Skew == 0 {
		o.Skew = 30 * time.Millisecond
	}
	if o.Rounds == 0 {
		o.Rounds = 5
	}
	if o.Sources == 0 {
		o.Sources = 1000
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Tenants == 0 {
		o.Tenants = 5
	}
	return o
}

func (o Options) validate() error {
	switch {
	case o.Nodes < 1 || o.Nodes > 1000:
		return fmt.Errorf("lab: nodes must be 1 to 1000, got %d", o.Nodes)
	case o.Limit < 1 || o.Limit > 1_000_000:
		return fmt.Errorf("lab: limit must be 1 to 1000000, got %d", o.Limit)
	case o.Period < time.Millisecond || o.Period%time.Microsecond != 0:
		return fmt.Errorf("lab: period must be a whole number of microseconds, at least 1ms, got %v", o.Period)
	case o.Windows < 1 || o.Windows > 10_000:
		return fmt.Errorf("lab: windows must be 1 to 10000, got %d", o.Windows)
	case o.Skew < 0:
		return fmt.Errorf("lab: skew must not be negative, got %v", o.Skew)
	case o.Rounds < 1:
		return fmt.Errorf("lab: rounds must be at least 1, got %d", o.Rounds)
	case o.Sources < 1:
		return fmt.Errorf("lab: sources must be at least 1, got %d", o.Sources)
	case o.Tenants < 2 || o.Tenants > 1000:
		return fmt.Errorf("lab: tenants must be 2 to 1000, got %d", o.Tenants)
	}
	for _, s := range o.Sync {
		if s < 0 {
			return fmt.Errorf("lab: sync intervals must not be negative, got %v", s)
		}
	}
	return nil
}

// Run runs one scenario (one of Scenarios) and returns its report. It fails
// on an unknown scenario, invalid options, or a store error.
func Run(ctx context.Context, scenario string, o Options) (*Report, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	run, ok := map[string]func(context.Context, *env) (*Report, error){
		Boundary:   runBoundary,
		Nodes:      runNodes,
		StaleCache: runStaleCache,
		Race:       runRace,
		Skew:       runSkew,
		Accuracy:   runAccuracy,
		Hybrid:     runHybrid,
		Fairness:   runFairness,
		Usage:      runUsage,
	}[scenario]
	if !ok {
		return nil, fmt.Errorf("lab: unknown scenario %q (want one of %v)", scenario, Scenarios)
	}
	e, err := newEnv(ctx, o)
	if err != nil {
		return nil, err
	}
	defer e.close()
	r, err := run(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("lab: %s: %w", scenario, err)
	}
	r.Scenario, r.Store = scenario, o.Store
	return r, nil
}
