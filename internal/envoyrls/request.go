package envoyrls

import (
	"slices"
	"sync"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
)

// maxCost caps a cost taken from a request. It is above every policy's
// capacity (policies keep their quantities below 2^53), so a capped cost is
// still one no limit admits, and summing a few capped costs cannot overflow.
const maxCost = 1 << 53

// limitKind says what became of a matched limit.
type limitKind uint8

const (
	kindLive      limitKind = iota // decided as checks[check]
	kindReplaced                   // dropped by another limit's replaces: neither decided nor reported
	kindZeroLimit                  // a limit of 0 requests (a ban): checks[check], which nothing passes
	kindRefused                    // a descriptor too large or malformed to decide: denied (policy is nil)
	kindUnlimited                  // the descriptor matched an unlimited node (policy is nil)
)

// limitRef is one limit a descriptor matched.
type limitRef struct {
	policy *config.Policy
	key    string
	plan   string // the plan its descriptor named, for a policy with plans
	cost   int64
	desc   int32 // the descriptor's index in the request
	check  int32 // index in scratch.checks, for kindLive and kindZeroLimit
	kind   limitKind
}

// scratch is one request's working memory, pooled so that the common request
// allocates nothing here once the pool is warm.
type scratch struct {
	entries []config.Entry
	limits  []limitRef // in descriptor order
	checks  []engine.Check
	results []sluice.Result
	best    []int32 // per descriptor: the index in limits of the limit it reports, or -1
	quotas  []httplimit.Quota
	// req is what the engine decides: checks and results, Envoy's contract,
	// and after deciding the outcome.
	req engine.Request
	// shadow: the domain is in shadow mode (config.Domain.Shadow), so the
	// request is OK whatever its statuses say.
	shadow bool
}

var scratchPool = sync.Pool{New: func() any {
	return &scratch{
		entries: make([]config.Entry, 0, 8),
		limits:  make([]limitRef, 0, 8),
		checks:  make([]engine.Check, 0, 8),
		results: make([]sluice.Result, 0, 8),
		best:    make([]int32, 0, 8),
	}
}}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

// maxPooledLimits: a scratch that grew past this (a request near the caps)
// is left to the GC rather than kept alive by the pool.
const maxPooledLimits = 256

func putScratch(sc *scratch) {
	if cap(sc.limits) > maxPooledLimits || cap(sc.checks) > maxPooledLimits {
		return
	}
	// Drop the references to request data and configuration so the pool does
	// not keep them alive.
	clear(sc.entries)
	clear(sc.limits)
	clear(sc.checks)
	clear(sc.quotas)
	sc.entries, sc.limits, sc.checks, sc.quotas = sc.entries[:0], sc.limits[:0], sc.checks[:0], sc.quotas[:0]
	sc.results, sc.best = sc.results[:0], sc.best[:0]
	sc.req, sc.shadow = engine.Request{}, false
	scratchPool.Put(sc)
}

// collect matches every descriptor of req against cfg and records the limits
// that apply, with their store keys and costs.
func (s *Server) collect(sc *scratch, cfg *config.Config, req *rlsv3.RateLimitRequest) {
	domain := req.GetDomain()
	reqHits := req.GetHitsAddend()
	// As envoyproxy/ratelimit: a domain with no configuration has no limits,
	// not even the overrides Envoy sends.
	configured := cfg.Domains[domain] != nil
	for i, d := range req.GetDescriptors() {
		entries := d.GetEntries()
		if len(entries) > s.maxEntries {
			// Too large to decide, and an error would be let through.
			sc.refuse(i)
			continue
		}
		cost := hits(reqHits, d)
		if s.overrides && configured && d.GetLimit() != nil {
			// As envoyproxy/ratelimit: an override replaces whatever the
			// configuration would have matched.
			if !sc.addOverride(i, domain, d, cost) {
				sc.refuse(i)
			}
			continue
		}
		if len(entries) == 0 {
			continue // matches nothing: OK without a limit, as envoyproxy/ratelimit
		}
		sc.entries = sc.entries[:0]
		for _, e := range entries {
			sc.entries = append(sc.entries, config.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		m := cfg.MatchShared(domain, sc.entries)
		if m.Unlimited {
			sc.limits = append(sc.limits, limitRef{desc: int32(i), kind: kindUnlimited})
			continue
		}
		if len(m.Limits) == 0 {
			continue
		}
		keyed := sc.entries
		if m.PlanEntry {
			keyed = keyed[:len(keyed)-1] // the plan's entry picks a limit, not a counter
		}
		key := storeKey(keyed)
		for _, p := range m.Limits {
			ref := limitRef{policy: p, key: key, plan: m.Plan, cost: cost, desc: int32(i)}
			if p.DeniesAll() {
				// requests_per_unit: 0 bans the value: nothing passes.
				ref.kind = kindZeroLimit
			}
			sc.limits = append(sc.limits, ref)
		}
	}
}

// refuse records that descriptor i cannot be decided: it is OVER_LIMIT, and
// so is the request.
func (sc *scratch) refuse(i int) {
	sc.limits = append(sc.limits, limitRef{desc: int32(i), kind: kindRefused})
}

// hits is a descriptor's cost. The request's hits_addend is a proto3 scalar,
// so 0 means unset, which the proto defines as 1; the descriptor's is a
// wrapper, so its explicit 0 is a real 0: a peek that reports the state and
// consumes nothing. Sluice cannot give units back, so a refund
// (is_negative_hits) is a peek too: it never admits more than was asked for.
func hits(reqHits uint32, d *ratelimitv3.RateLimitDescriptor) int64 {
	if d.GetIsNegativeHits() {
		return 0
	}
	if h := d.GetHitsAddend(); h != nil {
		return int64(min(h.GetValue(), maxCost))
	}
	if reqHits == 0 {
		return 1
	}
	return int64(reqHits)
}

// plan turns the matched limits into the request the engine decides:
// replaced limits are dropped, the same (policy, key) from several
// descriptors becomes one check charged the sum of their costs, and a
// refused descriptor refuses the request. The engine resolves each check to
// the limit it is decided under (its override's or plan's) and flags a cost
// above that limit's capacity, which denies the request: Envoy must not see
// an error it may be configured to fail open on.
func (sc *scratch) plan() {
	sc.applyReplaces()
	refused := false
	for i := range sc.limits {
		l := &sc.limits[i]
		switch l.kind {
		case kindRefused:
			refused = true
			continue
		case kindReplaced, kindUnlimited:
			// Once replaces has had its say: a replaced ban bans nothing.
			continue
		}
		j := sc.find(l.policy.Name, l.key)
		if j < 0 {
			j = len(sc.checks)
			sc.checks = append(sc.checks, engine.Check{Policy: l.policy, Key: l.key, Cost: l.cost, Plan: l.plan})
		} else {
			sc.checks[j].Cost = min(sc.checks[j].Cost+l.cost, maxCost)
		}
		l.check = int32(j)
	}
	n := len(sc.checks)
	sc.results = slices.Grow(sc.results[:0], n)[:n]
	sc.req = engine.Request{Checks: sc.checks, Results: sc.results, DenyOverCapacity: true, QuotaMode: true, Debt: true, Refused: refused}
}

// find returns the index of the check of (policy, key), or -1. A linear scan:
// requests have a few checks, and the scan allocates nothing.
func (sc *scratch) find(policy, key string) int {
	for i := range sc.checks {
		if sc.checks[i].Key == key && sc.checks[i].Policy.Name == policy {
			return i
		}
	}
	return -1
}

// applyReplaces drops every limit whose rule name another matched limit
// replaces, as envoyproxy/ratelimit does: the replacing set is taken over all
// matched limits, whichever descriptor they came from.
func (sc *scratch) applyReplaces() {
	replacing := false
	for i := range sc.limits {
		if p := sc.limits[i].policy; p != nil && len(p.Replaces) > 0 {
			replacing = true
			break
		}
	}
	if !replacing {
		return
	}
	for i := range sc.limits {
		l := &sc.limits[i]
		if l.policy == nil || l.policy.RuleName == "" {
			continue
		}
		for j := range sc.limits {
			if p := sc.limits[j].policy; p != nil && p != l.policy && slices.Contains(p.Replaces, l.policy.RuleName) {
				l.kind = kindReplaced
				break
			}
		}
	}
}

// descriptorOf returns the first descriptor that led to check i, for error
// messages.
func (sc *scratch) descriptorOf(i int) int {
	for _, l := range sc.limits {
		if (l.kind == kindLive || l.kind == kindZeroLimit) && int(l.check) == i {
			return int(l.desc)
		}
	}
	return -1
}
