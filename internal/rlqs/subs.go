package rlqs

import (
	"context"
	"slices"
	"strconv"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"

	"github.com/sluicehq/sluice/internal/config"
)

// track subscribes st to the bucket named name, or returns nil when st
// holds its cap of buckets.
func (s *Server) track(st *stream, name string, id *rlqsv3.BucketId) *sub {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(st.subs) >= s.maxBuckets {
		return nil
	}
	sb := &sub{st: st, id: id, name: name, member: st.id + "." + strconv.FormatUint(s.seq.Add(1), 10)}
	st.subs[name] = sb
	s.metrics.buckets.Inc()
	return sb
}

// retarget sets sb's limits (a reload may change them), watching the board
// buckets of the new ones, and returns the board buckets sb left. Called
// with s.mu held.
func (s *Server) retarget(sb *sub, limits []limit, applied []*config.Policy) []string {
	var gone []string
	for _, l := range sb.limits {
		bb := l.boardBucket()
		if !slices.ContainsFunc(limits, func(n limit) bool { return n.boardBucket() == bb }) {
			s.unwatch(bb, sb)
			gone = append(gone, bb)
		}
	}
	sb.limits, sb.applied = limits, applied
	for _, l := range limits {
		bb := l.boardBucket()
		w := s.watchers[bb]
		if w == nil {
			w = make(map[*sub]struct{})
			s.watchers[bb] = w
		}
		w[sb] = struct{}{}
	}
	return gone
}

// unwatch stops sb watching bb. Called with s.mu held.
func (s *Server) unwatch(bb string, sb *sub) {
	delete(s.watchers[bb], sb)
	if len(s.watchers[bb]) == 0 {
		delete(s.watchers, bb)
		delete(s.members, bb)
	}
}

// untrack drops sb, its stream's subscription, and takes its demand off the
// board, adding the board buckets it left to touched.
func (s *Server) untrack(ctx context.Context, sb *sub, touched map[string]bool) {
	s.mu.Lock()
	if sb.st.subs[sb.name] != sb {
		s.mu.Unlock()
		return // dropped meanwhile
	}
	delete(sb.st.subs, sb.name)
	s.metrics.buckets.Dec()
	gone := make([]string, 0, len(sb.limits))
	for _, l := range sb.limits {
		bb := l.boardBucket()
		s.unwatch(bb, sb)
		gone = append(gone, bb)
	}
	s.mu.Unlock()
	for _, bb := range gone {
		s.leave(ctx, bb, sb.member, touched)
	}
}

// leave takes member off board bucket bb and notes bb's members left.
func (s *Server) leave(ctx context.Context, bb, member string, touched map[string]bool) {
	members, err := s.board.Leave(ctx, bb, member)
	if err != nil {
		// Its entry expires on the board within its time to live.
		s.log.Warn("rate limit quota: the demand board failed to drop a member", "error", err)
		return
	}
	s.mu.Lock()
	if _, watched := s.watchers[bb]; watched {
		s.members[bb] = members
	}
	s.mu.Unlock()
	touched[bb] = true
}

// reassign pushes a new assignment to every local subscription on the
// touched board buckets, but those in answered, whose share moved beyond
// tolerance.
func (s *Server) reassign(touched map[string]bool, answered map[*sub]bool) {
	if len(touched) == 0 {
		return
	}
	pushes := make(map[*stream][]*rlqsv3.RateLimitQuotaResponse_BucketAction)
	s.mu.Lock()
	for bb := range touched {
		for sb := range s.watchers[bb] {
			if answered[sb] {
				continue
			}
			answered[sb] = true
			old := sb.sent
			a := s.assign(sb, s.ttlOf(sb.interval), false)
			if within(a, old) {
				sb.sent = old // unchanged: Envoy extends it with the next answer
				continue
			}
			pushes[sb.st] = append(pushes[sb.st], s.action(sb.id, a))
		}
	}
	s.mu.Unlock()
	for st, actions := range pushes {
		s.push(st, actions)
	}
}

// Sweep abandons every bucket whose reports stopped for its assignment's
// time to live: its Envoy is told with an AbandonAction (it stops reporting
// and starts over on its next request), its demand leaves the board, and
// the others on its limits are reassigned. Run calls it periodically; tests
// call it after moving their clock.
func (s *Server) Sweep() {
	now := s.clock.Now()
	var stale []*sub
	s.mu.Lock()
	for _, w := range s.watchers {
		for sb := range w {
			if now.Sub(sb.last) >= s.ttlOf(sb.interval) && !slices.Contains(stale, sb) {
				stale = append(stale, sb)
			}
		}
	}
	s.mu.Unlock()
	if len(stale) == 0 {
		return
	}
	ctx := context.Background()
	touched := make(map[string]bool)
	abandons := make(map[*stream][]*rlqsv3.RateLimitQuotaResponse_BucketAction)
	for _, sb := range stale {
		s.untrack(ctx, sb, touched)
		s.metrics.assignments.WithLabelValues(actionAbandon).Inc()
		abandons[sb.st] = append(abandons[sb.st], &rlqsv3.RateLimitQuotaResponse_BucketAction{BucketId: sb.id,
			BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_{AbandonAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction{}}})
	}
	for st, actions := range abandons {
		s.push(st, actions)
	}
	s.reassign(touched, make(map[*sub]bool))
}

// closeStream frees everything st held: its subscriptions, its demand on
// the board, and its place among the streams; the others on its limits are
// reassigned.
func (s *Server) closeStream(ctx context.Context, st *stream) {
	s.mu.Lock()
	subs := make([]*sub, 0, len(st.subs))
	for _, sb := range st.subs {
		subs = append(subs, sb)
	}
	s.streams--
	s.metrics.streams.Dec()
	s.mu.Unlock()
	// The stream's context is done: the board calls get their own.
	ctx = context.WithoutCancel(ctx)
	touched := make(map[string]bool)
	for _, sb := range subs {
		s.untrack(ctx, sb, touched)
	}
	s.reassign(touched, make(map[*sub]bool))
}
