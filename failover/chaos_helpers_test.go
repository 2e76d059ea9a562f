package failover_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/redisstore"
)

// Settings of the chaos tests. The machine running them is shared and
// loaded, so the margins are generous: what the tests tell apart is a bounded
// wait (timeout + margin) from a hang (seconds, or the go test timeout).
const (
	// chaosTimeout is the fail-over Store's per-call timeout: five times the
	// production default, so that a healthy Redis behind -race on two busy
	// cores rarely misses it.
	chaosTimeout = 50 * time.Millisecond
	// chaosMargin is what a call may take beyond chaosTimeout: scheduling
	// delays, the fail policy's own work, the race detector. On two cores
	// shared with other test binaries and CPU burners a call with Redis down
	// was seen to take 388 ms without a stall the meter could see, so the
	// margin is a second: still far below a hang (a dial timeout is seconds).
	chaosMargin = time.Second
	// The breaker judges the last chaosFailures calls (it opens when half of
	// them failed) and probes every chaosCooldown: the cool-down must stay
	// well below chaosRecovery, or an open breaker alone would miss it.
	chaosFailures = 3
	chaosCooldown = 250 * time.Millisecond
	// chaosRecovery is how soon after Redis is back (Restart or Resume
	// returned) decisions must be Redis' again: the requirement.
	chaosRecovery = 2 * time.Second
	// chaosWorkers goroutines decide in a loop during every fault.
	chaosWorkers = 16
)

// chaosPolicy allows 20 per hour: during a test (seconds) GCRA frees no
// further unit, so a store that admits more than 20 on one key ignored the
// limit.
var chaosPolicy = &sluice.Policy{Name: "chaos", Algorithm: sluice.GCRA, Limit: 20, Period: time.Hour}

var chaosPrefixes atomic.Int64

// openRedis opens a Store on url for the length of the test, with a key prefix
// no other store in this process uses. Its own per-call timeout is far above
// the fail-over Store's, so the latter is the one that bounds each call.
func openRedis(t *testing.T, url string, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	opts = append([]redisstore.Option{
		redisstore.WithPrefix(fmt.Sprintf("chaos%d:", chaosPrefixes.Add(1))),
		redisstore.WithTimeout(5 * time.Second),
	}, opts...)
	rs, err := redisstore.Open(url, opts...)
	if err != nil {
		t.Fatalf("redisstore.Open(%s): %v", url, err)
	}
	t.Cleanup(func() { _ = rs.Close() })
	return rs
}

// newChaosStore wraps primary with the chaos settings and mode, logging the
// breaker's transitions into bl.
func newChaosStore(primary sluice.Store, mode failover.Mode, bl *breakerLog, opts ...failover.Option) *failover.Store {
	opts = append([]failover.Option{
		failover.WithMode(mode),
		failover.WithTimeout(chaosTimeout),
		failover.WithBreaker(failover.BreakerSettings{MinCalls: chaosFailures, Cooldown: chaosCooldown}),
		failover.WithStateChange(bl.record),
	}, opts...)
	return failover.New(primary, opts...)
}

// breakerLog records the breaker's transitions with their times.
type breakerLog struct {
	mu     sync.Mutex
	events []breakerEvent
}

type breakerEvent struct {
	at       time.Time
	from, to failover.BreakerState
}

func (b *breakerLog) record(from, to failover.BreakerState) {
	b.mu.Lock()
	b.events = append(b.events, breakerEvent{time.Now(), from, to})
	b.mu.Unlock()
}

// opened returns when the breaker first opened at or after from, or the zero
// time if it did not.
func (b *breakerLog) opened(from time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.events {
		if e.to == failover.BreakerOpen && !e.at.Before(from) {
			return e.at
		}
	}
	return time.Time{}
}

// since describes the transitions at or after from.
func (b *breakerLog) since(from time.Time) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var sb strings.Builder
	for _, e := range b.events {
		if !e.at.Before(from) {
			fmt.Fprintf(&sb, " +%v:%v", e.at.Sub(from).Round(time.Millisecond), e.to)
		}
	}
	return sb.String()
}

func (b *breakerLog) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.events)
}

// waitDecided decides key on s until Redis, not the fail policy, answers, and
// returns that result; it fails the test if that does not happen at all.
func waitDecided(t *testing.T, s sluice.Store, key string) sluice.Result {
	t.Helper()
	var r sluice.Result
	testwait.UntilSaw(t, "a decision by Redis on "+key, func() (bool, string) {
		var err error
		r, err = s.Decide(context.Background(), sluice.Request{Policy: chaosPolicy, Key: key, Cost: 1})
		return err == nil && !r.Degraded, fmt.Sprintf("%+v, %v", r, err)
	})
	return r
}

// chaosCall is one Decide made by the load.
type chaosCall struct {
	start, end time.Time
	worker     int
	key        int // index into the load's keys
	res        sluice.Result
	err        error
}

func (c chaosCall) latency() time.Duration { return c.end.Sub(c.start) }

// byRedis reports whether Redis decided the call: no error, not degraded.
func (c chaosCall) byRedis() bool { return c.err == nil && !c.res.Degraded }

// load is chaosWorkers goroutines deciding in a loop on a fail-over Store,
// worker w on keys[w%len(keys)], recording every call.
type load struct {
	keys      []string
	stop      atomic.Bool
	wg        sync.WaitGroup
	perWorker [][]chaosCall
	made      []atomic.Int64 // per worker: calls made
	lastRedis []atomic.Int64 // per worker: unix ns at which its latest call decided by Redis ended
}

// startLoad starts the load; t.Cleanup halts it if the test does not.
func startLoad(t *testing.T, s sluice.Store, workers int, keys ...string) *load {
	l := &load{keys: keys, perWorker: make([][]chaosCall, workers),
		made: make([]atomic.Int64, workers), lastRedis: make([]atomic.Int64, workers)}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			k := w % len(keys)
			req := sluice.Request{Policy: chaosPolicy, Key: keys[k], Cost: 1}
			var calls []chaosCall
			for !l.stop.Load() {
				start := time.Now()
				r, err := s.Decide(context.Background(), req)
				end := time.Now()
				c := chaosCall{start: start, end: end, worker: w, key: k, res: r, err: err}
				calls = append(calls, c)
				if c.byRedis() {
					l.lastRedis[w].Store(end.UnixNano())
				}
				l.made[w].Add(1)
				// A short pause: while the breaker is open a decision takes
				// microseconds, and 16 goroutines spinning would starve the
				// redis-server processes this test (and others) depend on.
				time.Sleep(time.Millisecond)
			}
			l.perWorker[w] = calls
		}()
	}
	t.Cleanup(func() { l.halt() })
	return l
}

// halt stops the load, waits for the workers and returns every call made,
// sorted by start. Only the test goroutine (or its cleanup) calls it.
func (l *load) halt() []chaosCall {
	l.stop.Store(true)
	l.wg.Wait()
	var all []chaosCall
	for _, calls := range l.perWorker {
		all = append(all, calls...)
	}
	slices.SortFunc(all, func(a, b chaosCall) int { return a.start.Compare(b.start) })
	return all
}

// keyOf is the index of worker w's key.
func (l *load) keyOf(w int) int { return w % len(l.keys) }

// waitRedis waits, for at most limit, until a call decided by Redis has
// ended after from: for any worker (all false) or for every worker (all
// true), among the workers whose key keyOK accepts (nil: all). It reports
// whether that happened; the exact times are read from the records once the
// load is halted.
func (l *load) waitRedis(from time.Time, limit time.Duration, all bool, keyOK func(int) bool) bool {
	return testwait.For(limit, func() bool {
		seen, want := 0, 0
		for w := range l.lastRedis {
			if keyOK != nil && !keyOK(l.keyOf(w)) {
				continue
			}
			want++
			if l.lastRedis[w].Load() > from.UnixNano() {
				seen++
			}
		}
		return seen > 0 && (!all || seen == want)
	})
}

// mark returns how many calls each worker has made so far, for waitCalls.
func (l *load) mark() []int64 {
	m := make([]int64, len(l.made))
	for w := range l.made {
		m[w] = l.made[w].Load()
	}
	return m
}

// waitCalls waits, for at most limit, until every worker has made n calls
// since mark, and reports whether they did: a worker that does not is stuck
// in a call.
func (l *load) waitCalls(mark []int64, n int64, limit time.Duration) bool {
	return testwait.For(limit, func() bool {
		for w := range l.made {
			if l.made[w].Load()-mark[w] < n {
				return false
			}
		}
		return true
	})
}

// backToRedis returns, among the calls that started after from and whose
// key keyOK accepts (nil: all), when the first one decided by Redis ended,
// and when every worker had had one (the latest of the workers' first); ok is
// false if some worker had none.
func backToRedis(calls []chaosCall, from time.Time, keyOK func(int) bool) (first, all time.Time, ok bool) {
	firstOf := make(map[int]time.Time)
	workers := make(map[int]bool)
	for _, c := range calls {
		if keyOK != nil && !keyOK(c.key) {
			continue
		}
		workers[c.worker] = true
		if c.byRedis() && c.start.After(from) {
			if f, seen := firstOf[c.worker]; !seen || c.end.Before(f) {
				firstOf[c.worker] = c.end
			}
		}
	}
	for _, f := range firstOf {
		if first.IsZero() || f.Before(first) {
			first = f
		}
		if f.After(all) {
			all = f
		}
	}
	return first, all, len(firstOf) > 0 && len(firstOf) == len(workers)
}

// outage is when a fault was injected into Redis and when it was healed.
type outage struct {
	faulting, faulted time.Time // before and after the fault (Kill, Pause)
	healing, healed   time.Time // before and after the cure (Restart, Resume)
}

// runOutage drives l through a fault: a moment of healthy load, fault(), at
// least a second of load against the broken Redis (and until every worker
// has made 20 calls there: a worker that cannot is stuck in a call), heal(),
// then load until every worker has been decided by Redis again, and 300ms
// more. It halts the load and returns the calls.
func runOutage(t *testing.T, l *load, fault, heal func()) (outage, []chaosCall) {
	t.Helper()
	var o outage
	started := time.Now()
	if !l.waitRedis(started, testwait.Timeout, false, nil) {
		t.Fatalf("no call was decided by Redis in the %v after the load started", testwait.Timeout)
	}
	time.Sleep(200 * time.Millisecond)
	o.faulting = time.Now()
	fault()
	o.faulted = time.Now()
	mark := l.mark()
	time.Sleep(time.Second)
	if !l.waitCalls(mark, 20, 10*time.Second) {
		t.Errorf("some worker made fewer than 20 calls in the 10 s after the fault: it is stuck in a call (calls made since: %v)", l.since(mark))
	}
	o.healing = time.Now()
	heal()
	o.healed = time.Now()
	l.waitRedis(o.healed, testwait.Timeout, true, nil) // checked on the records
	time.Sleep(300 * time.Millisecond)
	return o, l.halt()
}

// since returns how many calls each worker made since mark.
func (l *load) since(mark []int64) []int64 {
	d := l.mark()
	for w := range d {
		d[w] -= mark[w]
	}
	return d
}

// checkOutage checks what every outage must show: every call explained by
// the fail policy within the bound, none decided by Redis while it was
// broken, the breaker opened, and every worker decided by Redis again within
// chaosRecovery (less this process' stalls) after the cure. It logs the
// measurements.
func checkOutage(t *testing.T, m *stallMeter, mode failover.Mode, bl *breakerLog, o outage, calls []chaosCall, what string) {
	t.Helper()
	raw, active := checkCalls(t, m, mode, calls)
	broken := count(calls, within(o.faulted, o.healing))
	t.Logf("before the %s: %v", what, count(calls, func(c chaosCall) bool { return c.end.Before(o.faulting) }))
	t.Logf("while broken (%v): %v", o.healing.Sub(o.faulted).Round(time.Millisecond), broken)
	if broken.redis != 0 {
		t.Errorf("%d calls were decided by Redis after the %s and before the cure", broken.redis, what)
	}
	if at := bl.opened(o.faulting); at.IsZero() {
		t.Errorf("the breaker did not open after the %s", what)
	} else {
		t.Logf("breaker opened %v after the %s", at.Sub(o.faulting).Round(time.Millisecond), what)
	}
	first, all, ok := backToRedis(calls, o.healed, nil)
	if !ok {
		cured := func(c chaosCall) bool { return c.start.After(o.healed) }
		var after []chaosCall
		for _, c := range calls {
			if cured(c) {
				after = append(after, c)
			}
		}
		t.Errorf("some worker was never decided by Redis again after the cure (%v later: %v; first decision by Redis %v after the cure; breaker %s; failures after the cure:%s)",
			time.Since(o.healed).Round(time.Millisecond), count(after, cured), first.Sub(o.healed), bl.since(o.healed), causes(after))
		return
	}
	recovery := m.active(o.healed, all)
	t.Logf("cure took %v; after it, first decision by Redis %v, every worker's %v (%v not counting stalls); slowest call %v (%v not counting stalls); longest stall of the process %v",
		o.healed.Sub(o.healing).Round(time.Millisecond), first.Sub(o.healed).Round(time.Millisecond),
		all.Sub(o.healed).Round(time.Millisecond), recovery.Round(time.Millisecond),
		raw.Round(time.Millisecond), active.Round(time.Millisecond), m.worst().Round(time.Millisecond))
	if recovery > chaosRecovery {
		t.Errorf("decisions went back to Redis %v after the cure (%v not counting stalls), want <= %v", all.Sub(o.healed), recovery, chaosRecovery)
	}
}

// verdict checks one call against the fail policy: a call is either decided
// by Redis (no error, not degraded) or answered by the policy exactly as
// documented. It returns "" for a valid call, else what is wrong.
func verdict(mode failover.Mode, c chaosCall) string {
	if c.byRedis() {
		return ""
	}
	p := chaosPolicy
	switch mode {
	case failover.FailOpen:
		if c.err != nil {
			return fmt.Sprintf("FailOpen returned an error: %v", c.err)
		}
		if !c.res.Allowed || c.res.Limit != p.Limit || c.res.Remaining != p.Capacity()-1 {
			return fmt.Sprintf("FailOpen's degraded result %+v is not an uncounted admission", c.res)
		}
	case failover.FailClosed:
		var ue *failover.UnavailableError
		switch {
		case c.err == nil:
			return fmt.Sprintf("FailClosed returned a degraded result without an error: %+v", c.res)
		case !errors.Is(c.err, failover.ErrUnavailable) || !errors.As(c.err, &ue) || ue.Cause == nil:
			return fmt.Sprintf("FailClosed returned %T %q, want an *UnavailableError wrapping ErrUnavailable and a cause", c.err, c.err)
		case c.res != (sluice.Result{}):
			return fmt.Sprintf("FailClosed returned a result %+v with its error", c.res)
		}
	case failover.FailLocal:
		if c.err != nil {
			return fmt.Sprintf("FailLocal returned an error: %v", c.err)
		}
		if c.res.Limit != p.Limit {
			return fmt.Sprintf("FailLocal's local result %+v has the wrong limit", c.res)
		}
	}
	return ""
}

// stallMeter measures the time this test process could not run at all. The
// machine is shared: a busy host deschedules the whole VM or process for
// hundreds of milliseconds, even seconds, during which no code can return
// and every timer fires late. A heartbeat goroutine waking every millisecond
// records the gaps; a call's latency minus the stalls that overlap it is
// what the code under test spent, and that is what the bounds apply to. A
// call hanging in the store does not stop the heartbeat, so it is still
// caught.
type stallMeter struct {
	mu   sync.Mutex
	gaps []stall
	stop atomic.Bool
	done chan struct{}
}

type stall struct{ from, to time.Time }

// stallMin is the shortest heartbeat gap counted as a stall; shorter ones are
// ordinary scheduling noise, which the margin absorbs.
const stallMin = 20 * time.Millisecond

func startStallMeter(t *testing.T) *stallMeter {
	m := &stallMeter{done: make(chan struct{})}
	go func() {
		defer close(m.done)
		last := time.Now()
		for !m.stop.Load() {
			time.Sleep(time.Millisecond)
			now := time.Now()
			if now.Sub(last) > stallMin {
				m.mu.Lock()
				m.gaps = append(m.gaps, stall{last.Add(time.Millisecond), now})
				m.mu.Unlock()
			}
			last = now
		}
	}()
	t.Cleanup(func() {
		m.stop.Store(true)
		<-m.done
	})
	return m
}

// stalled returns how long the process was stalled between from and to.
func (m *stallMeter) stalled(from, to time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var d time.Duration
	for _, g := range m.gaps {
		lo, hi := g.from, g.to
		if lo.Before(from) {
			lo = from
		}
		if hi.After(to) {
			hi = to
		}
		if hi.After(lo) {
			d += hi.Sub(lo)
		}
	}
	return d
}

// worst returns the longest stall so far.
func (m *stallMeter) worst() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var d time.Duration
	for _, g := range m.gaps {
		d = max(d, g.to.Sub(g.from))
	}
	return d
}

// active is the time from from to to that the process was not stalled.
func (m *stallMeter) active(from, to time.Time) time.Duration {
	return to.Sub(from) - m.stalled(from, to)
}

// checkCalls fails the test for every call (the first few are shown) that
// the fail policy does not explain or whose latency, less the process'
// stalls during it, exceeds chaosTimeout + chaosMargin. It returns the
// largest latency, raw and less stalls.
func checkCalls(t *testing.T, m *stallMeter, mode failover.Mode, calls []chaosCall) (raw, active time.Duration) {
	t.Helper()
	bound := chaosTimeout + chaosMargin
	var bad, slow int
	for _, c := range calls {
		raw = max(raw, c.latency())
		if v := verdict(mode, c); v != "" {
			if bad++; bad <= 5 {
				t.Errorf("call at %s: %s", c.start.Format("15:04:05.000"), v)
			}
		}
		if c.latency() <= bound {
			active = max(active, c.latency())
			continue
		}
		a := m.active(c.start, c.end)
		active = max(active, a)
		if a > bound {
			if slow++; slow <= 5 {
				t.Errorf("call at %s took %v (%v not counting stalls of this process), more than the timeout %v + margin %v (result %+v, err %v)",
					c.start.Format("15:04:05.000"), c.latency(), a, chaosTimeout, chaosMargin, c.res, c.err)
			}
		}
	}
	if bad > 0 || slow > 0 {
		t.Errorf("%d of %d calls not explained by the fail policy, %d slower than %v", bad, len(calls), slow, bound)
	}
	return raw, active
}

// tally counts calls by who decided them.
type tally struct {
	n, redis, degraded int
	worst              time.Duration
}

func (tl tally) String() string {
	return fmt.Sprintf("%d calls (%d by Redis, %d degraded, slowest %v)", tl.n, tl.redis, tl.degraded, tl.worst.Round(time.Millisecond))
}

// count tallies the calls that keep accepts.
func count(calls []chaosCall, keep func(chaosCall) bool) tally {
	var tl tally
	for _, c := range calls {
		if !keep(c) {
			continue
		}
		tl.n++
		if c.byRedis() {
			tl.redis++
		} else {
			tl.degraded++
		}
		tl.worst = max(tl.worst, c.latency())
	}
	return tl
}

// within accepts calls that started at or after from and ended before to
// (zero to: no end).
func within(from, to time.Time) func(chaosCall) bool {
	return func(c chaosCall) bool {
		return !c.start.Before(from) && (to.IsZero() || c.end.Before(to))
	}
}

// causes summarises the distinct causes of FailClosed denials (first line,
// numbers stripped so that ports and durations do not split them), most
// frequent first, for the log.
func causes(calls []chaosCall) string {
	n := make(map[string]int)
	for _, c := range calls {
		var ue *failover.UnavailableError
		if errors.As(c.err, &ue) {
			n[squash(ue.Cause.Error())]++
		}
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return n[b] - n[a] })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n\t%6d × %s", n[k], k)
	}
	return b.String()
}

func squash(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return '#'
		}
		return r
	}, s)
}

// mustDo runs a redis-cli command on srv.
func mustDo(t *testing.T, srv *redistest.Server, args ...string) string {
	t.Helper()
	out, err := srv.Do(args...)
	if err != nil {
		t.Fatalf("redis-cli %v on %s: %v", args, srv.Addr(), err)
	}
	return out
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, master string
	port       int
	flags      []string
	slots      [][2]int
}

func (n clusterNode) is(flag string) bool { return slices.Contains(n.flags, flag) }

// clusterNodes returns CLUSTER NODES as the first node that answers sees it.
func clusterNodes(t *testing.T, c *redistest.Cluster) []clusterNode {
	t.Helper()
	var lastErr error
	for _, srv := range c.Nodes {
		out, err := srv.Do("CLUSTER", "NODES")
		if err != nil {
			lastErr = err
			continue
		}
		var nodes []clusterNode
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 8 {
				continue
			}
			addr, _, _ := strings.Cut(f[1], "@")
			_, portStr, _ := strings.Cut(addr, ":")
			port, _ := strconv.Atoi(portStr)
			n := clusterNode{id: f[0], master: f[3], port: port, flags: strings.Split(f[2], ",")}
			for _, r := range f[8:] {
				if strings.HasPrefix(r, "[") {
					continue // a slot being migrated
				}
				lo, hi, found := strings.Cut(r, "-")
				a, _ := strconv.Atoi(lo)
				b := a
				if found {
					b, _ = strconv.Atoi(hi)
				}
				n.slots = append(n.slots, [2]int{a, b})
			}
			nodes = append(nodes, n)
		}
		return nodes
	}
	t.Fatalf("no cluster node answered CLUSTER NODES: %v", lastErr)
	return nil
}

// slotOwner returns the healthy master serving slot in nodes, if any.
func slotOwner(nodes []clusterNode, slot int) (clusterNode, bool) {
	for _, n := range nodes {
		if !n.is("master") || n.is("fail") || n.is("fail?") {
			continue
		}
		for _, r := range n.slots {
			if slot >= r[0] && slot <= r[1] {
				return n, true
			}
		}
	}
	return clusterNode{}, false
}

// serverOn returns the cluster's server listening on port.
func serverOn(t *testing.T, c *redistest.Cluster, port int) *redistest.Server {
	t.Helper()
	for _, srv := range c.Nodes {
		if srv.Port() == port {
			return srv
		}
	}
	t.Fatalf("no cluster node on port %d", port)
	return nil
}
