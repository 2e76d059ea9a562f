// Package share keeps the fair shares of the policies whose limit is shared
// among their keys, the tenants (a native policy's share: fair).
//
// Each node counts its tenants' demand — the units they ask, admitted or
// denied — per policy, with one atomic add per decision. Every interval (the
// policy's share_interval) a node posts its tenants' demand rates to the
// policy's demand board in the store (sluice.DemandBoard), reads every
// node's back, and divides the policy's limit among the tenants by weighted
// max-min fairness (package fairshare). A decision then only looks its
// tenant's limit up: the store work per decision is that of an ordinary
// check, and the board is read once per interval per node.
//
// A tenant's limit is its fair share if it wanted more: the water level
// times its weight, or, for one asking less than that, its allocation when it
// is larger (spare capacity, when demand is below the limit). So a tenant
// asking less than its fair share is never limited by the others, one asking
// more gets the level, and the levels of the unsatisfied tenants plus the
// demand of the others sum to the limit. The policy's own limit is checked
// too, by the engine, all or nothing: together they never exceed it.
package share

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Sharer keeps the shares of every fair-share policy it is asked about. It is
// safe for concurrent use.
type Sharer struct {
	board   sluice.DemandBoard // nil: each node shares by its own tenants' demand
	clock   sluice.Clock
	node    string
	onError func(error)

	mu    sync.Mutex                       // guards changes of pools
	pools atomic.Pointer[map[string]*pool] // by policy name; copied on change
	ticks sync.WaitGroup                   // recomputations in flight
}

// Option configures a Sharer.
type Option func(*Sharer)

// WithClock sets the clock demand is timed by (default: the system's).
func WithClock(c sluice.Clock) Option { return func(s *Sharer) { s.clock = c } }

// WithNode names this node on the demand boards (default: random). Nodes
// sharing a store need distinct names.
func WithNode(id string) Option { return func(s *Sharer) { s.node = id } }

// WithErrorHandler is called with each failure to post or read a board;
// the shares in force stay until a read succeeds.
func WithErrorHandler(f func(error)) Option { return func(s *Sharer) { s.onError = f } }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// New returns a Sharer sharing demand through board; nil board: each node
// divides each limit among the tenants it sees itself.
func New(board sluice.DemandBoard, opts ...Option) *Sharer {
	s := &Sharer{board: board, clock: systemClock{}, onError: func(error) {}}
	for _, o := range opts {
		o(s)
	}
	if s.node == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		s.node = hex.EncodeToString(b[:])
	}
	s.node = strings.ReplaceAll(s.node, " ", "_") // a space ends it in a member
	s.pools.Store(&map[string]*pool{})
	return s
}

// Board names the demand board of a fair-share policy.
func Board(policy string) string { return "fair:" + policy }

// Limit counts cost units of demand by tenant under p, a fair-share policy
// whose shares are recomputed every interval, with the tenant's weight (0 or
// less: 1), and returns the policy the tenant's own check is decided under:
// p at the tenant's share of p's rate. It is O(1); when the interval has
// passed it starts a recomputation in the background.
func (s *Sharer) Limit(p *sluice.Policy, interval time.Duration, tenant string, cost int64, weight float64) *sluice.Policy {
	if weight <= 0 {
		weight = 1
	}
	pl := s.pool(p, interval)
	now := s.clock.Now().UnixMicro()
	pl.count(tenant, cost, weight)
	if now >= pl.next.Load() && pl.ticking.CompareAndSwap(false, true) {
		s.ticks.Add(1)
		go func() {
			defer s.ticks.Done()
			defer pl.ticking.Store(false)
			s.recompute(pl, now)
		}()
	}
	t := pl.table.Load()
	if e, ok := t.of[tenant]; ok {
		return e.limit(cost)
	}
	if weight == 1 {
		return t.newcomer.limit(cost)
	}
	return newEntry(&t.policy, t.newcomer.rate*weight).limit(cost)
}

// Wait waits for the recomputations in flight.
func (s *Sharer) Wait() { s.ticks.Wait() }

// Recompute waits for the recomputations in flight, then runs every one due
// at the clock's now on the caller's goroutine. A node needs no call of it:
// a decision that finds its policy's interval passed starts one in the
// background. It is for a caller that moves the clock itself — a test, a
// simulation — so that the shares change at the same point of its run every
// time, not at whichever of its decisions a background recomputation
// happens to finish.
func (s *Sharer) Recompute() {
	s.Wait()
	now := s.clock.Now().UnixMicro()
	for _, pl := range *s.pools.Load() {
		if now >= pl.next.Load() && pl.ticking.CompareAndSwap(false, true) {
			s.recompute(pl, now)
			pl.ticking.Store(false)
		}
	}
}

// Shares returns the rate (units per period) each tenant of policy is
// limited to now, and a newcomer's; nil before policy was asked about.
func (s *Sharer) Shares(policy string) (tenants map[string]float64, newcomer float64) {
	pl := (*s.pools.Load())[policy]
	if pl == nil {
		return nil, 0
	}
	t := pl.table.Load()
	tenants = make(map[string]float64, len(t.of))
	for k, e := range t.of {
		tenants[k] = e.rate
	}
	return tenants, t.newcomer.rate
}

// pool returns p's pool, made on first use, with p and interval as they
// are configured now.
func (s *Sharer) pool(p *sluice.Policy, interval time.Duration) *pool {
	if pl := (*s.pools.Load())[p.Name]; pl != nil {
		pl.configure(p, interval)
		return pl
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pools := *s.pools.Load()
	if pl := pools[p.Name]; pl != nil {
		pl.configure(p, interval)
		return pl
	}
	now := s.clock.Now().UnixMicro()
	pl := &pool{name: p.Name, last: now, nodeID: s.node}
	pl.configure(p, interval)
	pl.next.Store(now + interval.Microseconds())
	pl.table.Store(&table{policy: *p, newcomer: newEntry(p, float64(p.Limit))})
	next := make(map[string]*pool, len(pools)+1)
	for k, v := range pools {
		next[k] = v
	}
	next[p.Name] = pl
	s.pools.Store(&next)
	return pl
}

// Retain forgets the shares of every policy keep does not keep — one a
// reload removed, or made no longer fair-share — so that they are no longer
// reported (Stats); such a policy that comes back starts afresh.
func (s *Sharer) Retain(keep func(policy string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pools := *s.pools.Load()
	next := make(map[string]*pool, len(pools))
	for name, pl := range pools {
		if keep(name) {
			next[name] = pl
		}
	}
	if len(next) < len(pools) {
		s.pools.Store(&next)
	}
}

// member is a node's tenant on a board: the node, the tenant's weight and
// the tenant, separated by spaces (the tenant last: it may hold any byte).
func member(node string, weight float64, tenant string) string {
	return node + " " + strconv.FormatFloat(weight, 'g', -1, 64) + " " + tenant
}

// parseMember undoes member.
func parseMember(m string) (weight float64, tenant string, ok bool) {
	_, rest, ok1 := strings.Cut(m, " ")
	w, tenant, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 {
		return 0, "", false
	}
	weight, err := strconv.ParseFloat(w, 64)
	return weight, tenant, err == nil
}

// recompute posts pl's local demand, reads every node's, and installs the
// new shares, as of now (µs): the time it was found due, not the time it
// gets to run, which on a busy node may be later — and then, on a clock
// moved by its caller, after the clock has moved on. A board failure keeps
// the shares in force.
func (s *Sharer) recompute(pl *pool, now int64) {
	interval := time.Duration(pl.interval.Load())
	pl.next.Store(now + interval.Microseconds())
	p := pl.policy.Load()
	posts := pl.drain(now, p.Period, interval)
	demands := posts
	if s.board != nil {
		// No timeout of its own: the store's bounds its calls (failover's
		// timeout, the Redis store's own), and one here, on the wall clock,
		// ended board calls on a loaded machine while the shares' clock
		// stood still.
		ctx := context.Background()
		board := Board(p.Name)
		if err := s.board.PostDemand(ctx, board, posts, 3*interval); err != nil {
			s.onError(err)
		}
		var err error
		if demands, err = s.board.ReadDemand(ctx, board); err != nil {
			s.onError(err)
			return
		}
	}
	pl.table.Store(allocate(p, demands))
}

// Stats is one fair-share policy's shares in force on this node.
type Stats struct {
	Policy string
	// Tenants is how many tenants have a share: those asking, on any node,
	// as of the last recomputation.
	Tenants int
	// Level is the limit, in units per period of the policy, of a tenant
	// of weight 1 not on the board yet: while some tenants ask for more
	// than they get, the water level (their limit per unit of weight);
	// otherwise an equal part of the limit.
	Level float64
}

// Stats returns the shares in force of every policy asked about, by policy
// name. It is O(policies), whatever the number of tenants.
func (s *Sharer) Stats() []Stats {
	pools := *s.pools.Load()
	out := make([]Stats, 0, len(pools))
	for name, pl := range pools {
		t := pl.table.Load()
		out = append(out, Stats{Policy: name, Tenants: len(t.of), Level: t.newcomer.rate})
	}
	slices.SortFunc(out, func(a, b Stats) int { return strings.Compare(a.Policy, b.Policy) })
	return out
}
