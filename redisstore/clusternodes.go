package redisstore

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
)

// A Cluster's slot map, read by the store itself: rueidis routes commands by
// its own map but does not expose it, and a breaker per master needs to know
// which master a key's call goes to before making it.
const (
	// clusterSlots is how many hash slots a Cluster has.
	clusterSlots = 16384
	// nodesRefresh is how old the slot map may grow while the store is in
	// use: a replica promoted in place of a dead master gets the master's
	// keys (and a breaker of its own) within about this long.
	nodesRefresh = time.Second
	// nodesAskTimeout bounds the wait for one node's slot map: a
	// stalled node must not hold up the refresh (the next node is asked).
	nodesAskTimeout = 500 * time.Millisecond
	// nodesRefreshTimeout bounds a whole refresh.
	nodesRefreshTimeout = 2 * time.Second
	// nodesRetrigger is how soon after a reading began the next may begin:
	// calls failing by the thousand during a fail-over cost at most ten
	// readings a second.
	nodesRetrigger = 100 * time.Millisecond
	// nodesWatch is how long after a call failed (stale) the map is read
	// again and again until it changes.
	nodesWatch = time.Second
)

// NodeOf names the Redis node that holds (p, key), for
// failover.WithBreakerPerNode: on a sharded store the shard's Name (on a
// routed one, the route's address), or for a shard that is a Cluster the
// master within it; on a Cluster the address ("host:port") of the master
// serving the key's slot,
// as the store last read the slot map (it reads it again every second while
// in use, and at once after a call fails with MOVED, CLUSTERDOWN,
// TRYAGAIN or a connection error); "" for a single Redis, for a Cluster before the map is read, and
// for a Runner of another client library.
func (s *Store) NodeOf(p *sluice.Policy, key string) string {
	if loc, ok := s.run.(nodeLocator); ok && loc.manyNodes() {
		return loc.nodeOf(s.ref(p, key))
	}
	return ""
}

// nodeLocator is a Runner whose keys live on several nodes it can name.
type nodeLocator interface {
	manyNodes() bool
	nodeOf(k keyRef) string
}

// NodeError is a failed call on one node of a Cluster. It names the master
// so that a breaker per node (failover.WithBreakerPerNode) blames only it.
type NodeError struct {
	Node string // the master's address, as NodeOf names it
	Err  error
}

func (e *NodeError) Error() string { return "node " + e.Node + ": " + e.Err.Error() }

// Unwrap returns the node's error.
func (e *NodeError) Unwrap() error { return e.Err }

// FailedNode returns e.Node, for failover.WithBreakerPerNode.
func (e *NodeError) FailedNode() string { return e.Node }

// blame makes err, the failure of a call on key, name the node that holds
// key, unless it names one already (a ShardError).
func (s *Store) blame(key string, err error) error {
	var named interface{ FailedNode() string }
	if errors.As(err, &named) {
		return err
	}
	if loc, ok := s.run.(nodeLocator); ok && loc.manyNodes() {
		if node := loc.nodeOf(builtKey(key)); node != "" {
			return &NodeError{Node: node, Err: err}
		}
	}
	return err
}

func (r *rueidisRunner) manyNodes() bool { return r.nodes != nil }

func (r *rueidisRunner) nodeOf(k keyRef) string { return r.nodes.of(k.slot()) }

func (l *lazyRunner) manyNodes() bool {
	r := l.runner.Load()
	return r != nil && r.manyNodes()
}

func (l *lazyRunner) nodeOf(k keyRef) string {
	if r := l.runner.Load(); r != nil && r.manyNodes() {
		return r.nodeOf(k)
	}
	return ""
}

func (r *ShardedRunner) manyNodes() bool { return len(r.shards) > 1 }

// nodeOf names the shard of k, or within a shard that is a Cluster (or
// sharded itself; a routed store's route may be either) the node of k, so
// that each keeps a breaker per node as it would alone.
func (r *ShardedRunner) nodeOf(k keyRef) string {
	sh := &r.shards[r.shardFor(k)]
	if loc, ok := sh.Runner.(nodeLocator); ok && loc.manyNodes() {
		if node := loc.nodeOf(k); node != "" {
			return node
		}
	}
	return sh.Name
}

// clusterNodes is a Cluster's slot → master map. A lookup that finds the map
// older than every, or a call that failed in a way that says the map may be
// wrong (stale), starts a refresh in the background (one at a time) and
// answers from the map it has, so no decision waits for it; with no
// decisions there is no refresh either, and nothing to stop at Close.
type clusterNodes struct {
	client rueidis.Client
	every  time.Duration // nodesRefresh; longer in tests of stale
	table  atomic.Pointer[slotTable]
	due    atomic.Int64 // unix ns from which a lookup starts a refresh
	began  atomic.Int64 // unix ns when the last reading began
	watch  atomic.Int64 // unix ns until which to read until the map changes
	busy   atomic.Bool  // a reading is in flight
	// noShards is set once a server refused CLUSTER SHARDS: read CLUSTER
	// SLOTS instead (clustershards.go).
	noShards atomic.Bool
}

// slotTable is one reading of the slot map.
type slotTable struct {
	owner   [clusterSlots]uint16 // index into masters
	masters []string             // masters[0] is "": no master known
}

// slotRange is one range of a slot map: slots from to to (inclusive) are
// served by master.
type slotRange struct {
	from, to int64
	master   string
}

func newClusterNodes(c rueidis.Client, every time.Duration) *clusterNodes {
	n := &clusterNodes{client: c, every: every}
	n.refreshAsync() // read the map before the first decision needs it
	return n
}

// of returns the master serving slot, or "" when it is not known yet.
func (n *clusterNodes) of(slot int) string {
	if time.Now().UnixNano() >= n.due.Load() {
		n.refreshAsync()
	}
	t := n.table.Load()
	if t == nil {
		return ""
	}
	return t.masters[t.owner[slot]]
}

// stale notes a call that failed in a way that may mean the map is wrong.
// The map is read again at once, and then every nodesRetrigger until it
// changes or nodesWatch has passed since the last such failure: the calls
// of a fail-over fail until the replica is promoted and rueidis finds it,
// so the last of them may come just before the map shows the new master.
func (n *clusterNodes) stale() {
	n.watch.Store(time.Now().Add(nodesWatch).UnixNano())
	n.refreshAsync()
}

// refreshAsync starts reading the map unless a reading is in flight; it
// reads again while a failed call asks it to (stale).
func (n *clusterNodes) refreshAsync() {
	if !n.busy.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for {
			// One reading per nodesRetrigger at most, however many calls
			// fail.
			time.Sleep(time.Until(time.Unix(0, n.began.Load()).Add(nodesRetrigger)))
			began := time.Now()
			n.began.Store(began.UnixNano())
			// Due again in every whether or not this one succeeds, so a
			// Cluster that cannot answer is asked once in every, not per
			// decision.
			n.due.Store(began.Add(n.every).UnixNano())
			watch, old := n.watch.Load(), n.table.Load()
			ctx, cancel := context.WithTimeout(context.Background(), nodesRefreshTimeout)
			_ = n.refresh(ctx) // a failed refresh keeps the map it had
			cancel()
			if t := n.table.Load(); t != old && !t.sameOwners(old) {
				// The change is seen; a call failing since asks again.
				n.watch.CompareAndSwap(watch, 0)
			}
			if time.Now().UnixNano() >= n.watch.Load() {
				break
			}
		}
		n.busy.Store(false)
		// A call that failed after the last check found the reading busy.
		if time.Now().UnixNano() < n.watch.Load() {
			n.refreshAsync()
		}
	}()
}

// mapMayBeStale reports whether err, a call's failure on a Cluster, may mean
// the slot map changed: a MOVED reply rueidis did not follow (rueidis'
// IsRedirect is Valkey's REDIRECT only, so MOVED is asked for by itself),
// CLUSTERDOWN, TRYAGAIN, or no reply at all (a refused or lost connection, a
// timeout) — not an error a script returned, nor a caller that gave up. ASK
// is not: the slot is being migrated and its owner has not changed yet.
func mapMayBeStale(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if e, ok := rueidis.IsRedisErr(err); ok {
		_, moved := e.IsMoved()
		_, redirect := e.IsRedirect()
		return moved || redirect || e.IsClusterDown() || e.IsTryAgain()
	}
	return true
}

// refresh reads the slot map from the first node that answers, in random
// order (the map from rueidis' Nodes is unordered): a dead master costs at
// most nodesAskTimeout.
func (n *clusterNodes) refresh(ctx context.Context) error {
	var errs []error
	nodes := n.client.Nodes()
	for addr, node := range nodes {
		actx, cancel := context.WithTimeout(ctx, nodesAskTimeout)
		ranges, err := n.readSlotMap(actx, addr, node, nodes)
		cancel()
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		n.table.Store(newSlotTable(ranges, n.table.Load()))
		return nil
	}
	return errors.Join(append(errs, errors.New("redisstore: no Cluster node answered CLUSTER SHARDS or CLUSTER SLOTS"))...)
}

// slotRanges reads a CLUSTER SLOTS reply: [from, to, [host, port, id, …],
// replicas…] per range. A master with an empty host is on the host of addr,
// the node that answered (as Redis means it); lines it cannot read are
// skipped.
func slotRanges(reply []rueidis.RedisMessage, addr string) []slotRange {
	ranges := make([]slotRange, 0, len(reply))
	for _, line := range reply {
		v, err := line.ToArray()
		if err != nil || len(v) < 3 {
			continue
		}
		from, err1 := v[0].AsInt64()
		to, err2 := v[1].AsInt64()
		m, err3 := v[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(m) < 2 {
			continue
		}
		host, err1 := m[0].ToString()
		port, err2 := m[1].AsInt64()
		if err1 != nil || err2 != nil || host == "?" {
			continue
		}
		if host == "" {
			host, _, _ = net.SplitHostPort(addr)
		}
		ranges = append(ranges, slotRange{from: from, to: to, master: net.JoinHostPort(host, strconv.FormatInt(port, 10))})
	}
	return ranges
}

// sameOwners reports whether t and u (either may be nil) give every slot the
// same master.
func (t *slotTable) sameOwners(u *slotTable) bool {
	if t == nil || u == nil {
		return t == u
	}
	for slot := range t.owner {
		if t.masters[t.owner[slot]] != u.masters[u.owner[slot]] {
			return false
		}
	}
	return true
}

// newSlotTable builds the map ranges describe. Ranges out of bounds are
// skipped; a slot no range covers keeps its master in old (nil: none), so a
// node's partial view during a fail-over forgets nothing.
func newSlotTable(ranges []slotRange, old *slotTable) *slotTable {
	t := &slotTable{masters: []string{""}}
	index := map[string]uint16{"": 0}
	indexOf := func(master string) uint16 {
		i, ok := index[master]
		if !ok && len(t.masters) < clusterSlots {
			i = uint16(len(t.masters))
			index[master] = i
			t.masters = append(t.masters, master)
		}
		return i
	}
	var covered [clusterSlots]bool
	for _, r := range ranges {
		if r.from < 0 || r.to >= clusterSlots || r.from > r.to {
			continue
		}
		i := indexOf(r.master)
		for slot := r.from; slot <= r.to; slot++ {
			t.owner[slot], covered[slot] = i, true
		}
	}
	if old != nil {
		for slot := range t.owner {
			if !covered[slot] {
				t.owner[slot] = indexOf(old.masters[old.owner[slot]])
			}
		}
	}
	return t
}
