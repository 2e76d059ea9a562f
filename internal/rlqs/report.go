package rlqs

import (
	"context"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
)

// sub is one stream's subscription to one bucket.
type sub struct {
	st       *stream
	member   string // its member id on the Board
	id       *rlqsv3.BucketId
	name     string
	limits   []limit
	applied  []*config.Policy // each limit's policy as resolved: override, plan or its own
	demand   float64          // requests per second, as last reported
	interval time.Duration
	last     time.Time // of the last report
	sent     *rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction
}

// tolerance is the relative change of a share below which the assignment
// sent stands (and is extended): reported demands jitter, and a new
// strategy makes Envoy start its bucket over. The shares kept then sum to at
// most 1+tolerance times the limit.
const tolerance = 0.005

// report handles one message of st and returns the actions answering it,
// in the order of its reports; it pushes new assignments to the other
// local streams whose shares the reports moved.
func (s *Server) report(ctx context.Context, st *stream, m *rlqsv3.RateLimitQuotaUsageReports) []*rlqsv3.RateLimitQuotaResponse_BucketAction {
	cfg := s.svc.Config()
	now := s.clock.Now()
	touched := make(map[string]bool)
	answered := make(map[*sub]bool)
	var actions []*rlqsv3.RateLimitQuotaResponse_BucketAction
	for _, u := range m.GetBucketQuotaUsages() {
		if a := s.reportOne(ctx, st, cfg, u, now, touched, answered); a != nil {
			actions = append(actions, a)
		}
	}
	s.reassign(touched, answered)
	return actions
}

// reportOne handles one bucket's report and returns its answer (nil for a
// report without a bucket id, which nothing can answer).
func (s *Server) reportOne(ctx context.Context, st *stream, cfg *config.Config, u *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage,
	now time.Time, touched map[string]bool, answered map[*sub]bool) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	id := u.GetBucketId().GetBucket()
	use := readUsage(u, s.maxElapsed)
	ttl := s.ttlOf(use.interval)
	if r := checkBucketID(id); r != "" {
		s.metrics.refused.WithLabelValues(r).Inc()
		if len(id) == 0 {
			return nil
		}
		return s.action(u.GetBucketId(), blanketAssignment(typev3.RateLimitStrategy_DENY_ALL, ttl))
	}
	if use.refused != "" {
		s.metrics.refused.WithLabelValues(use.refused).Inc()
	}
	name := bucketName(id)
	t := resolve(cfg, st.domain, id)
	s.mu.Lock()
	sb := st.subs[name]
	s.mu.Unlock()
	if t.kind != targetLimited {
		if sb != nil {
			s.untrack(ctx, sb, touched)
		}
		rule := typev3.RateLimitStrategy_DENY_ALL
		switch t.kind {
		case targetUnlimited:
			rule = typev3.RateLimitStrategy_ALLOW_ALL
		case targetUnknown:
			s.metrics.refused.WithLabelValues(reasonUnknownPolicy).Inc()
			s.log.Debug("rate limit quota: a bucket names no policy; denied", "domain", st.domain, "policy", id[entryPolicy])
		}
		return s.action(u.GetBucketId(), blanketAssignment(rule, ttl))
	}
	if sb == nil {
		if sb = s.track(st, name, u.GetBucketId()); sb == nil {
			s.metrics.refused.WithLabelValues(reasonTooManyBucket).Inc()
			return s.action(u.GetBucketId(), blanketAssignment(typev3.RateLimitStrategy_DENY_ALL, ttl))
		}
	}
	applied := s.apply(t.limits)
	s.mu.Lock()
	gone := s.retarget(sb, t.limits, applied)
	if use.refused == "" {
		sb.demand = use.demand
	}
	if use.interval > 0 {
		sb.interval = use.interval
	}
	sb.last = now
	demand, ttl := sb.demand, s.ttlOf(sb.interval)
	s.mu.Unlock()
	for _, bb := range gone {
		s.leave(ctx, bb, sb.member, touched)
	}
	for _, l := range t.limits {
		bb := l.boardBucket()
		members, err := s.board.Report(ctx, bb, sb.member, demand, ttl)
		if err != nil {
			s.log.Warn("rate limit quota: the demand board failed; assigning from the members last read", "error", err)
			continue
		}
		s.mu.Lock()
		s.members[bb] = members
		s.mu.Unlock()
		touched[bb] = true
	}
	s.mu.Lock()
	a := s.assign(sb, ttl, true)
	s.mu.Unlock()
	answered[sb] = true
	return s.action(sb.id, a)
}

// apply resolves each limit's policy as the engine would decide it: its
// key's runtime override, else its plan's limit, else its own.
func (s *Server) apply(limits []limit) []*config.Policy {
	checks := make([]engine.Check, len(limits))
	for i, l := range limits {
		checks[i] = engine.Check{Policy: l.policy, Key: l.key, Plan: l.plan}
	}
	s.svc.Resolve(checks)
	applied := make([]*config.Policy, len(limits))
	for i := range checks {
		applied[i] = checks[i].Limit
	}
	return applied
}

// assign computes sb's assignment for ttl from the members last read, the
// tightest of its limits' shares, and records it as sent. With keep, a
// share within tolerance of the one sent keeps the strategy sent: the
// assignment then only extends it. Called with s.mu held.
func (s *Server) assign(sb *sub, ttl time.Duration, keep bool) *rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction {
	var best *rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction
	self := Member{ID: sb.member, Demand: sb.demand}
	for i, l := range sb.limits {
		a := assignment(sb.applied[i], shareOf(withMember(s.members[l.boardBucket()], self), self.ID, sb.applied[i]), ttl)
		if best == nil || rateOf(a) < rateOf(best) {
			best = a
		}
	}
	if keep && within(best, sb.sent) {
		best.RateLimitStrategy = sb.sent.GetRateLimitStrategy()
	}
	sb.sent = best
	return best
}

// within reports whether assignment a limits within tolerance of b, by the
// same kind of strategy.
func within(a, b *rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction) bool {
	if b == nil {
		return false
	}
	if sameStrategy(a, b) {
		return true
	}
	ra, rb := rateOf(a), rateOf(b)
	sameKind := func() bool {
		switch a.GetRateLimitStrategy().GetStrategy().(type) {
		case *typev3.RateLimitStrategy_RequestsPerTimeUnit_:
			return b.GetRateLimitStrategy().GetRequestsPerTimeUnit().GetTimeUnit() == a.GetRateLimitStrategy().GetRequestsPerTimeUnit().GetTimeUnit() &&
				b.GetRateLimitStrategy().GetRequestsPerTimeUnit() != nil
		case *typev3.RateLimitStrategy_TokenBucket:
			return b.GetRateLimitStrategy().GetTokenBucket() != nil
		}
		return false
	}
	return sameKind() && rb > 0 && ra <= rb*(1+tolerance) && ra >= rb*(1-tolerance)
}

// withMember is members with self in it: a member the board has not
// listed yet (or lost) still gets its share.
func withMember(members []Member, self Member) []Member {
	for _, m := range members {
		if m.ID == self.ID {
			return members
		}
	}
	return append(append(make([]Member, 0, len(members)+1), members...), self)
}

// action is the bucket action of a on id, counted.
func (s *Server) action(id *rlqsv3.BucketId, a *rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	kind := actionAllowAll
	switch st := a.GetRateLimitStrategy().GetStrategy().(type) {
	case *typev3.RateLimitStrategy_RequestsPerTimeUnit_:
		kind = actionRequestsPerUnit
	case *typev3.RateLimitStrategy_TokenBucket:
		kind = actionTokenBucket
	case *typev3.RateLimitStrategy_BlanketRule_:
		if st.BlanketRule == typev3.RateLimitStrategy_DENY_ALL {
			kind = actionDenyAll
		}
	}
	s.metrics.assignments.WithLabelValues(kind).Inc()
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{BucketId: id,
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{QuotaAssignmentAction: a}}
}
