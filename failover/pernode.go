package failover

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// MaxNodeBreakers bounds the breakers WithBreakerPerNode keeps: when a new
// node would exceed it, the closed and forgotten ones are dropped first, and
// if none can be, the new node's calls share the store's breaker.
const MaxNodeBreakers = 1024

// WithBreakerPerNode gives each Redis node the primary spreads its keys over
// (the shards of a sharded store, the masters of a Cluster) a circuit breaker
// of its own, so that one node failing sends only the decisions of its own
// keys to the fail policy. nodeOf names the node that holds a request's key;
// it must be quick and safe for concurrent use, and "" stands for the
// store's own breaker (a single Redis, or a node not known yet).
//
// Nodes may come and go — a Cluster promotes a replica in place of a dead
// master, and the slots move to it — so a node's breaker is made the first
// time a request names it, and one that no request has named for the
// breaker's window (BreakerSettings.Window) is forgotten: a dead master's
// open breaker stops counting once its slots have moved away.
//
// A call over keys on several nodes goes through each of their breakers, and
// its failure counts on the node the error names — an error with a method
// FailedNode() string, as redisstore's NodeError and ShardError have — or,
// when it names none of them, on all of them. The settings of WithBreaker
// apply to every node's breaker, and WithStateChange reports each one's
// transitions (WithNodeStateChange with the node's name). nil keeps one
// breaker for the store.
func WithBreakerPerNode(nodeOf func(sluice.Request) string) Option {
	return func(s *Store) { s.perNode.of = nodeOf }
}

// nodeBreakers are the breakers of WithBreakerPerNode, by node name.
type nodeBreakers struct {
	of     func(sluice.Request) string
	byName atomic.Pointer[map[string]*nodeBreaker] // copied on write
	mu     sync.Mutex                              // serialises writers
}

// nodeBreaker is one node's breaker, with the one-element slice a call over
// that node alone passes (no allocation per call).
type nodeBreaker struct {
	br  breaker
	one [1]*breaker
	// named is the unix ns at which a request last named the node while its
	// breaker was not closed, or the breaker last changed state.
	named atomic.Int64
}

// initBreakers sets up the breakers once the options are applied.
func (s *Store) initBreakers() {
	s.storeBr = []*breaker{&s.br}
	if f := s.onChange; f != nil {
		s.br.onChange = func(from, to BreakerState) { f("", from, to) }
	}
}

// breakersOf returns the breakers a call over reqs passes: the store's one,
// or each distinct node's. One request costs no allocation.
func (s *Store) breakersOf(reqs []sluice.Request) []*breaker {
	if s.perNode.of == nil || len(reqs) == 0 {
		return s.storeBr
	}
	first := s.breakerOf(s.perNode.of(reqs[0]))
	if len(reqs) == 1 {
		return first
	}
	brs := first[:1:1] // append copies
	for _, r := range reqs[1:] {
		if b := s.breakerOf(s.perNode.of(r))[0]; !containsBreaker(brs, b) {
			brs = append(brs, b)
		}
	}
	return brs
}

// breakerOf returns node's breaker as a one-element slice, made on first use.
func (s *Store) breakerOf(node string) []*breaker {
	nb := s.lookupNode(node)
	if nb == nil {
		if node == "" {
			return s.storeBr
		}
		if nb = s.addNode(node); nb == nil {
			return s.storeBr
		}
	}
	if BreakerState(nb.br.state.Load()) != BreakerClosed {
		nb.named.Store(s.clock.Now().UnixNano())
	}
	return nb.one[:]
}

// lookupNode returns node's breaker, or nil if it has none.
func (s *Store) lookupNode(node string) *nodeBreaker {
	if m := s.perNode.byName.Load(); m != nil {
		return (*m)[node]
	}
	return nil
}

// addNode makes node's breaker, or returns nil when MaxNodeBreakers are
// all needed.
func (s *Store) addNode(node string) *nodeBreaker {
	s.perNode.mu.Lock()
	defer s.perNode.mu.Unlock()
	var old map[string]*nodeBreaker
	if m := s.perNode.byName.Load(); m != nil {
		old = *m
	}
	if nb, ok := old[node]; ok {
		return nb
	}
	now := s.clock.Now()
	m := make(map[string]*nodeBreaker, len(old)+1)
	for name, nb := range old {
		if len(old) < MaxNodeBreakers || s.counts(nb, now) {
			m[name] = nb
		}
	}
	if len(m) >= MaxNodeBreakers {
		return nil
	}
	nb := &nodeBreaker{br: newBreaker()}
	b := &nb.br
	b.window, b.age, b.rate, b.cooldown, b.probes = s.br.window, s.br.age, s.br.rate, s.br.cooldown, s.br.probes
	b.onChange = func(from, to BreakerState) {
		nb.named.Store(s.clock.Now().UnixNano())
		if s.onChange != nil {
			s.onChange(node, from, to)
		}
	}
	nb.one[0] = b
	m[node] = nb
	s.perNode.byName.Store(&m)
	return nb
}

// counts reports whether nb's breaker is not closed and its node was named
// within the breaker's window: a node's breaker that nothing uses any more
// (a dead master whose slots moved) must not hold the store's state open.
func (s *Store) counts(nb *nodeBreaker, now time.Time) bool {
	return BreakerState(nb.br.state.Load()) != BreakerClosed && now.UnixNano()-nb.named.Load() <= int64(nb.br.age)
}

// eachCounted calls f with the store's breaker and each node's that counts.
func (s *Store) eachCounted(now time.Time, f func(*breaker)) {
	f(&s.br)
	if m := s.perNode.byName.Load(); m != nil {
		for _, nb := range *m {
			if s.counts(nb, now) {
				f(&nb.br)
			}
		}
	}
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
	var named interface{ FailedNode() string }
	if !errors.As(err, &named) {
		return nil
	}
	b := &s.br
	if node := named.FailedNode(); node != "" {
		nb := s.lookupNode(node)
		if nb == nil {
			return nil
		}
		b = &nb.br
	}
	if !containsBreaker(brs, b) {
		return nil
	}
	return b
}

// State returns the breaker's state; with a breaker per node, the worst of
// those that count: open if any is open, else half_open if any is probing.
func (s *Store) State() BreakerState {
	worst := BreakerClosed
	s.eachCounted(s.clock.Now(), func(b *breaker) {
		switch st := BreakerState(b.state.Load()); {
		case st == BreakerOpen:
			worst = BreakerOpen
		case st == BreakerHalfOpen && worst == BreakerClosed:
			worst = BreakerHalfOpen
		}
	})
	return worst
}

// OpenNodes returns how many breakers that count are not closed (0 or 1
// without WithBreakerPerNode).
func (s *Store) OpenNodes() int {
	n := 0
	s.eachCounted(s.clock.Now(), func(b *breaker) {
		if BreakerState(b.state.Load()) != BreakerClosed {
			n++
		}
	})
	return n
}

// retryIn is the longest wait until a breaker that is not closed admits a
// probe: a hint for clients, which cannot know which node they depend on.
func (s *Store) retryIn(now time.Time) time.Duration {
	var d time.Duration
	s.eachCounted(now, func(b *breaker) { d = max(d, b.retryIn(now)) })
	return d
}
