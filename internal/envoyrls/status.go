package envoyrls

import (
	"math"
	"math/bits"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/decide"
)

const (
	codeOK        = rlsv3.RateLimitResponse_OK
	codeOverLimit = rlsv3.RateLimitResponse_OVER_LIMIT
)

// statusBlock holds the messages of one descriptor's status, so that a
// response allocates them all at once.
type statusBlock struct {
	status rlsv3.RateLimitResponse_DescriptorStatus
	limit  rlsv3.RateLimitResponse_RateLimit
	reset  durationpb.Duration
}

// respond builds the response of a decided request with n descriptors.
func (s *Server) respond(sc *scratch, n int) *rlsv3.RateLimitResponse {
	resp := &rlsv3.RateLimitResponse{OverallCode: codeOK}
	allowed := sc.req.Allowed
	var retry time.Duration
	if !allowed {
		retry = sc.markExhausted()
		// A domain in shadow mode (SHADOW_MODE) denies nothing, as
		// envoyproxy/ratelimit: the statuses still say what would have
		// denied the request, and the headers are those of an OK.
		if allowed = sc.shadow; !allowed {
			resp.OverallCode = codeOverLimit
		}
	}
	now := s.clock.Now()
	resp.Statuses = make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)
	blocks := make([]statusBlock, n)
	sc.best = sc.best[:0]
	li := 0
	for i := range n {
		b := &blocks[i]
		b.status.Code = codeOK
		resp.Statuses[i] = &b.status
		best := -1
		for ; li < len(sc.limits) && int(sc.limits[li].desc) == i; li++ {
			if sc.limits[li].kind != kindReplaced && (best < 0 || sc.moreRestrictive(li, best)) {
				best = li
			}
		}
		sc.best = append(sc.best, int32(best))
		if best >= 0 {
			sc.fill(b, &sc.limits[best], now)
		}
	}
	if s.headers {
		resp.ResponseHeadersToAdd = sc.headers(allowed, retry)
	}
	if s.limitHeaders.on() {
		if st := sc.headerStatus(resp); st != nil {
			resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd, s.limitHeaders.headers(st)...)
		}
	}
	return resp
}

// markExhausted returns the request's RetryAfter, and makes sure some
// enforced check is named as denying it, so that its descriptors are
// OVER_LIMIT.
//
// The engine flags the checks that denied (decide.Exhausted): when a batch
// is denied the store consumes nothing and reports every limit as it stands
// (a peek), so a limit is one of the denying ones exactly when it cannot
// admit its cost now, and a limit over capacity or a ban denies by
// definition.
func (sc *scratch) markExhausted() time.Duration {
	var retry time.Duration
	found, quota := false, false
	for i := range sc.checks {
		c := &sc.checks[i]
		switch {
		case c.Flags&decide.Quota != 0:
			if c.Flags&decide.Exhausted != 0 {
				// No quota left: it comes back when they do.
				quota = true
				retry = max(retry, sc.results[i].RetryAfter)
			}
		case c.Flags&decide.Shadow != 0 || sc.req.QuotaDenied:
			// Denied for want of quota, the enforced limits admitted the
			// request (and were charged): none of them is exhausted.
		default:
			retry = max(retry, sc.results[i].RetryAfter)
			found = found || c.Flags&decide.Exhausted != 0
		}
	}
	if !found && !quota && !sc.req.Blocked {
		// A store whose Remaining disagrees with its denial: better to name
		// every charged limit than none, since the request is OVER_LIMIT.
		for i := range sc.checks {
			if c := &sc.checks[i]; c.Flags&decide.Shadow == 0 && c.Cost > 0 {
				c.Flags |= decide.Exhausted
			}
		}
	}
	return retry
}

// rank orders a descriptor's limits for reporting: one that denies the
// request first, then enforced ones, then shadow ones.
func (sc *scratch) rank(l *limitRef) (rank int, remaining int64) {
	switch l.kind {
	case kindRefused:
		return 0, 0
	case kindUnlimited:
		return 3, math.MaxInt64
	case kindZeroLimit:
		if l.cost > 0 && (!l.policy.Shadow || l.policy.QuotaMode) {
			return 0, 0
		}
		return 1, 0
	}
	switch {
	case sc.over(l.check):
		rank = 0
	case !l.policy.Shadow:
		rank = 1
	default:
		rank = 2
	}
	return rank, sc.results[l.check].Remaining
}

// moreRestrictive reports whether limits[a] is to be reported rather than
// limits[b]: it denies, or it is of a better rank with less remaining.
func (sc *scratch) moreRestrictive(a, b int) bool {
	ra, rema := sc.rank(&sc.limits[a])
	rb, remb := sc.rank(&sc.limits[b])
	if ra != rb {
		return ra < rb
	}
	return rema < remb
}

// fill writes the status of a descriptor that reports limit l, under the
// limit it was decided under (an override's or a plan's, when one applied).
// A shadow limit is never OVER_LIMIT: it is not enforced.
func (sc *scratch) fill(b *statusBlock, l *limitRef, now time.Time) {
	var res sluice.Result
	over := false
	applied := l.policy
	switch l.kind {
	case kindRefused:
		// Nothing was decided, so there is no limit to report.
		b.status.Code = codeOverLimit
		return
	case kindUnlimited:
		// As envoyproxy/ratelimit: OK, no limit, the most a uint32 holds.
		b.status.LimitRemaining = math.MaxUint32
		return
	case kindZeroLimit:
		over = l.cost > 0 && (!l.policy.Shadow || l.policy.QuotaMode)
	default:
		res = sc.results[l.check]
		over = sc.over(l.check)
		applied = sc.checks[l.check].Applied()
	}
	if over {
		b.status.Code = codeOverLimit
	}
	unit, rpu := rateOf(applied)
	// The YAML name, as envoyproxy/ratelimit sends it (Envoy appends it to
	// X-RateLimit-Limit); empty when the limit has none.
	b.limit.Name = l.policy.RuleName
	b.limit.Unit = unit
	b.limit.RequestsPerUnit = rpu
	b.status.CurrentLimit = &b.limit
	if !over {
		// As envoyproxy/ratelimit: a descriptor over its limit has nothing
		// left, whatever a cost larger than what remains left untouched.
		b.status.LimitRemaining = clampUint32(res.Remaining)
	}
	reset := untilReset(applied, res.ResetAfter, now)
	b.reset.Seconds = int64(reset / time.Second)
	b.reset.Nanos = int32(reset % time.Second)
	b.status.DurationUntilReset = &b.reset
}

// untilReset is a limited descriptor's duration_until_reset, never 0. A fixed
// window (envoyproxy/ratelimit's only kind, and a ban's) resets at the end of
// the current window, aligned to the epoch, whatever the key holds; a window
// of whole seconds reports it as envoyproxy/ratelimit does, in whole seconds
// from the current second (window - unix seconds mod window), so that the
// seconds Envoy and the limit headers show are the same as ratelimit's. Other
// algorithms report when the key's state is back to unused; a key holding
// nothing (a peek, a fresh key) reports how long one unit takes to come back,
// which is when the state would reset if a request were charged now.
func untilReset(p *config.Policy, after time.Duration, now time.Time) time.Duration {
	if p.Period <= 0 {
		return max(after, 1)
	}
	if p.Algorithm == sluice.FixedWindow || p.DeniesAll() {
		if p.Period%time.Second == 0 {
			window := int64(p.Period / time.Second)
			return time.Duration(window-now.Unix()%window) * time.Second
		}
		window := p.Period.Microseconds()
		if window <= 0 {
			return max(after, 1)
		}
		return time.Duration(window-now.UnixMicro()%window) * time.Microsecond
	}
	if after > 0 {
		return after
	}
	return max(p.Period/time.Duration(max(p.Limit, 1)), 1)
}

// units are the response's time units, shortest first, with the lengths
// envoyproxy/ratelimit gives them.
var units = [...]struct {
	unit rlsv3.RateLimitResponse_RateLimit_Unit
	d    time.Duration
}{
	{rlsv3.RateLimitResponse_RateLimit_SECOND, time.Second},
	{rlsv3.RateLimitResponse_RateLimit_MINUTE, time.Minute},
	{rlsv3.RateLimitResponse_RateLimit_HOUR, time.Hour},
	{rlsv3.RateLimitResponse_RateLimit_DAY, day},
	{rlsv3.RateLimitResponse_RateLimit_WEEK, 7 * day},
	{rlsv3.RateLimitResponse_RateLimit_MONTH, 30 * day},
	{rlsv3.RateLimitResponse_RateLimit_YEAR, 365 * day},
}

// rateOf expresses a policy as the response's requests_per_unit and unit.
//
// A period of exactly one unit is exact. Any other period (Sluice allows 1ms
// to ~142 years) is approximated: the unit is the shortest one at least as
// long as the period (a year for longer periods), and requests_per_unit is the
// limit scaled to it, floor(limit × unit/period), at least 1 — so 10 per 10s
// reads 60 per MINUTE and 5 per 500ms reads 10 per SECOND. The rate is right,
// the window is not: this field is informational (Envoy uses it for its
// x-ratelimit headers), and the decision itself is always the exact policy.
// unit_multiplier could express some periods exactly, but Envoys that predate
// it would read the rate wrong by that factor. A limit of 0 (an override) is 0.
func rateOf(p *config.Policy) (rlsv3.RateLimitResponse_RateLimit_Unit, uint32) {
	u := units[len(units)-1]
	for _, c := range units {
		if c.d >= p.Period {
			u = c
			break
		}
	}
	if u.d == p.Period || p.Limit <= 0 {
		return u.unit, clampUint32(p.Limit)
	}
	hi, lo := bits.Mul64(uint64(p.Limit), uint64(u.d))
	if hi >= uint64(p.Period) {
		return u.unit, math.MaxUint32
	}
	q, _ := bits.Div64(hi, lo, uint64(p.Period))
	return u.unit, uint32(min(max(q, 1), math.MaxUint32))
}

func clampUint32(v int64) uint32 {
	return uint32(min(max(v, 0), math.MaxUint32))
}
