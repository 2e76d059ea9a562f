package failover

import (
	"errors"
	"time"

	"github.com/sluicehq/sluice"
)

// WithBreakerPerNode gives each of the n Redis nodes the primary spreads its
// keys over (the shards of a sharded store) a circuit breaker of its own, so
// that one node failing sends only the decisions of its own keys to the fail
// policy. nodeOf returns the node, 0 to n-1, that holds a request's key; it
// must be quick and safe for concurrent use. A call over keys on several
// nodes goes through each of their breakers, and its failure counts on the
// node the error names — an error with a method FailedNode() int, as
// redisstore's shard errors have — or, when it names none, on all of them.
// The settings of WithBreaker apply to every node's breaker, and
// WithStateChange reports each one's transitions. n <= 1 keeps one breaker.
func WithBreakerPerNode(n int, nodeOf func(sluice.Request) int) Option {
	return func(s *Store) {
		if n > 1 && nodeOf != nil {
			s.perNode, s.nodeOf = make([]*breaker, n), nodeOf
		}
	}
}

// initBreakers sets up the breakers once the options are applied.
func (s *Store) initBreakers() {
	s.storeBr = []*breaker{&s.br}
	for i := range s.perNode {
		b := newBreaker()
		b.window, b.age, b.rate, b.cooldown, b.probes, b.onChange = s.br.window, s.br.age, s.br.rate, s.br.cooldown, s.br.probes, s.br.onChange
		s.perNode[i] = &b
	}
}

// breakersOf returns the breakers a call over reqs passes: the store's one,
// or each distinct node's. One request costs no allocation.
func (s *Store) breakersOf(reqs []sluice.Request) []*breaker {
	if s.perNode == nil || len(reqs) == 0 {
		return s.storeBr
	}
	first := s.node(reqs[0])
	brs := s.perNode[first : first+1 : first+1]
	for _, r := range reqs[1:] {
		if b := s.perNode[s.node(r)]; !containsBreaker(brs, b) {
			brs = append(brs, b)
		}
	}
	return brs
}

// node is nodeOf(r) kept within range: a wrong answer must not panic.
func (s *Store) node(r sluice.Request) int {
	n := s.nodeOf(r)
	if n < 0 || n >= len(s.perNode) {
		return 0
	}
	return n
}

func containsBreaker(brs []*breaker, b *breaker) bool {
	for _, x := range brs {
		if x == b {
			return true
		}
	}
	return false
}

// allowAll asks every breaker of brs; if one refuses, the tickets already
// handed out are given back and ok is false.
func allowAll(brs []*breaker, clock sluice.Clock, tickets []ticket) (ok bool) {
	for i, b := range brs {
		allowed, t := b.allow(clock)
		if !allowed {
			for j := range i {
				brs[j].release(tickets[j])
			}
			return false
		}
		tickets[i] = t
	}
	return true
}

// failedOn returns the breaker among brs that err blames, or nil when it
// names no node of them (then all share the failure).
func (s *Store) failedOn(brs []*breaker, err error) *breaker {
	if len(brs) < 2 {
		return nil
	}
	var named interface{ FailedNode() int }
	if !errors.As(err, &named) {
		return nil
	}
	n := named.FailedNode()
	if n < 0 || n >= len(s.perNode) || !containsBreaker(brs, s.perNode[n]) {
		return nil
	}
	return s.perNode[n]
}

// State returns the breaker's state; with a breaker per node, the worst
// of them: open if any is open, else half_open if any is probing.
func (s *Store) State() BreakerState {
	worst := BreakerState(s.br.state.Load())
	for _, b := range s.perNode {
		switch st := BreakerState(b.state.Load()); {
		case st == BreakerOpen:
			return BreakerOpen
		case st == BreakerHalfOpen:
			worst = BreakerHalfOpen
		}
	}
	return worst
}

// OpenNodes returns how many nodes' breakers are not closed (0 or 1 without
// WithBreakerPerNode).
func (s *Store) OpenNodes() int {
	n := 0
	for _, b := range s.storeBr {
		if BreakerState(b.state.Load()) != BreakerClosed {
			n++
		}
	}
	for _, b := range s.perNode {
		if BreakerState(b.state.Load()) != BreakerClosed {
			n++
		}
	}
	return n
}

// retryIn is the longest wait until a breaker that is not closed admits a
// probe: a hint for clients, which cannot know which node they depend on.
func (s *Store) retryIn(now time.Time) time.Duration {
	d := s.br.retryIn(now)
	for _, b := range s.perNode {
		if BreakerState(b.state.Load()) != BreakerClosed {
			d = max(d, b.retryIn(now))
		}
	}
	return d
}
