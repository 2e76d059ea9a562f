package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/redis/rueidis"
)

// Shard is one Redis server of a sharded store: its Runner, and the name its
// keys are placed by.
type Shard struct {
	// Name identifies the shard for placement: keys go to the shard whose
	// name scores highest for them, so a shard keeps its keys as long as it
	// keeps its name (Open uses the URL's address and database). Names must
	// be distinct.
	Name   string
	Runner Runner
}

// ShardedRunner spreads keys over independent Redis servers by rendezvous
// (highest random weight) hashing of the Redis key: every key has one home,
// found without coordination by every client that knows the same shards, and
// adding a shard to N moves only the ≈1/(N+1) of the keys the new shard now
// scores highest for. The Store's all-or-nothing checks over keys on several
// shards take the same path as keys in several Cluster slots (crossslot.go),
// because Colocated answers false for them.
type ShardedRunner struct {
	shards []shardOf
	// prefixes, when set, place a key by its prefix instead of its hash: the
	// shards are a routed store's routes (route.go).
	prefixes []string
}

type shardOf struct {
	seed uint64 // hash of the name
	Shard
}

var _ Runner = (*ShardedRunner)(nil)

// NewShardedRunner returns a Runner over shards (at least one, distinct
// names). The caller owns the shards' Runners.
func NewShardedRunner(shards ...Shard) (*ShardedRunner, error) {
	if len(shards) == 0 {
		return nil, errors.New("redisstore: a sharded store needs at least one shard")
	}
	r := &ShardedRunner{shards: make([]shardOf, len(shards))}
	seen := map[string]bool{}
	for i, s := range shards {
		if seen[s.Name] {
			return nil, fmt.Errorf("redisstore: shard %q is given twice", s.Name)
		}
		seen[s.Name] = true
		r.shards[i] = shardOf{seed: hash64(s.Name), Shard: s}
	}
	return r, nil
}

// ShardOf returns the index, in the order given to NewShardedRunner, of the
// shard that holds key (a Redis key, as Store.Key returns it).
func (r *ShardedRunner) ShardOf(key string) int { return r.shardFor(builtKey(key)) }

func (r *ShardedRunner) shardFor(k keyRef) int {
	if len(r.shards) == 1 {
		return 0
	}
	if r.prefixes != nil {
		return k.routeIn(r.prefixes)
	}
	h := k.hash()
	best, top := 0, uint64(0)
	for i, s := range r.shards {
		// Ties (astronomically rare) go to the earlier shard.
		if w := mix64(h ^ s.seed); i == 0 || w > top {
			best, top = i, w
		}
	}
	return best
}

// Run runs s on the shard of keys[0]: the Store runs a script over several
// keys only when Colocated said they share a shard.
func (r *ShardedRunner) Run(ctx context.Context, s *Script, keys, args []string, reply []int64) error {
	if len(keys) == 0 {
		return errors.New("redisstore: a sharded store cannot run a script without keys")
	}
	sh := r.ShardOf(keys[0])
	if err := r.shards[sh].Runner.Run(ctx, s, keys, args, reply); err != nil {
		return r.failed(sh, keys[0], err)
	}
	return nil
}

// failed wraps err, the failure of a call on key on shard sh, in a
// ShardError naming the node NodeOf names for key.
func (r *ShardedRunner) failed(sh int, key string, err error) error {
	return &ShardError{Shard: sh, Name: r.shards[sh].Name, Node: r.nodeOf(builtKey(key)), Err: err}
}

// ShardError is a failed call on one shard. It names the shard so that a
// breaker per shard (failover.WithBreakerPerNode) blames only that one.
type ShardError struct {
	Shard int    // index in the order given to NewShardedRunner
	Name  string // the shard's Name
	// Node is the node of the shard the call went to, as Store.NodeOf names
	// it: the shard's Name, or for a shard that is a Cluster (or sharded
	// itself) the node within it.
	Node string
	Err  error
}

func (e *ShardError) Error() string { return "shard " + e.Name + ": " + e.Err.Error() }

// Unwrap returns the shard's error.
func (e *ShardError) Unwrap() error { return e.Err }

// FailedNode returns e.Node (else e.Name), as Store.NodeOf names it, for
// failover.WithBreakerPerNode.
func (e *ShardError) FailedNode() string {
	if e.Node != "" {
		return e.Node
	}
	return e.Name
}

// RunMulti sends each shard its calls, the shards in parallel, so a set
// spread over shards costs one round trip, not one per shard.
func (r *ShardedRunner) RunMulti(ctx context.Context, calls []Call) {
	if len(calls) == 0 {
		return
	}
	idx := make([][]int, len(r.shards))
	for i := range calls {
		if len(calls[i].Keys) == 0 {
			calls[i].Err = errors.New("redisstore: a sharded store cannot run a script without keys")
			continue
		}
		sh := r.ShardOf(calls[i].Keys[0])
		idx[sh] = append(idx[sh], i)
	}
	var wg sync.WaitGroup
	for sh, mine := range idx {
		if len(mine) == 0 {
			continue
		}
		if len(mine) == len(calls) { // all on one shard: no copies
			r.shards[sh].Runner.RunMulti(ctx, calls)
			r.blame(sh, calls)
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			part := make([]Call, len(mine))
			for j, i := range mine {
				part[j] = calls[i] // Reply shares its backing array
			}
			r.shards[sh].Runner.RunMulti(ctx, part)
			r.blame(sh, part)
			for j, i := range mine {
				calls[i].Err = part[j].Err
			}
		}()
	}
	wg.Wait()
}

// blame wraps the errors of shard sh's calls in ShardErrors.
func (r *ShardedRunner) blame(sh int, calls []Call) {
	for i := range calls {
		if calls[i].Err != nil {
			calls[i].Err = r.failed(sh, calls[i].Keys[0], calls[i].Err)
		}
	}
}

// Colocated reports whether keys all live on one shard (and, should that
// shard be a Cluster, in one slot of it).
func (r *ShardedRunner) Colocated(keys []string) bool {
	if len(keys) == 0 {
		return true
	}
	sh := r.ShardOf(keys[0])
	for _, k := range keys[1:] {
		if r.ShardOf(k) != sh {
			return false
		}
	}
	return r.shards[sh].Runner.Colocated(keys)
}

// Mode asks every shard: ModeFunctions if all run functions, ModeScripts if
// any falls back to scripts; the first error otherwise.
func (r *ShardedRunner) Mode(ctx context.Context) (Mode, error) {
	mode := ModeFunctions
	for _, s := range r.shards {
		m, err := s.Runner.Mode(ctx)
		if err != nil {
			return "", fmt.Errorf("shard %s: %w", s.Name, err)
		}
		if m == ModeScripts {
			mode = ModeScripts
		}
	}
	return mode, nil
}

// ModeReason gives each shard's reason, "name: reason; ..."; shards that
// have not decided yet are left out.
func (r *ShardedRunner) ModeReason() string {
	var parts []string
	for _, s := range r.shards {
		if why := modeReason(s.Runner); why != "" {
			parts = append(parts, s.Name+": "+why)
		}
	}
	return strings.Join(parts, "; ")
}

// hash64 is FNV-1a of s: stable across processes and releases, as placement
// must be.
func hash64(s string) uint64 { return fnvAdd(fnvOffset, s) }

// FNV-1a, 64 bits, as hash/fnv computes it, over strings given in pieces.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvAdd(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// mix64 is SplitMix64's finalizer: FNV alone varies too little in its high
// bits between similar inputs for a fair maximum.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// ShardURLs splits a store URL into its shards' URLs: the URL itself with
// its shard parameters removed, then each shard parameter's value. A URL
// without shard parameters is one Redis (or Cluster, or Sentinel) and
// comes back alone. Each URL must parse (see Open), and no two may name the
// same server.
func ShardURLs(raw string) ([]string, error) {
	base, query, _ := strings.Cut(raw, "?")
	if !strings.Contains(query, "shard=") {
		return []string{raw}, nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("store URL query: %w", err)
	}
	shards := q["shard"]
	q.Del("shard")
	if rest := q.Encode(); rest != "" {
		base += "?" + rest
	}
	urls := append([]string{base}, shards...)
	seen := map[string]bool{}
	for i, u := range urls {
		if _, err := rueidis.ParseURL(u); err != nil {
			return nil, fmt.Errorf("shard %d: %w", i+1, err)
		}
		name, err := shardName(u)
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", i+1, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("shard %d: %s is given twice", i+1, name)
		}
		seen[name] = true
	}
	return urls, nil
}

// shardName is the placement name of a shard's URL: its address, socket path
// and database, without scheme, credentials or options, so that changing a
// password or turning on TLS moves no keys.
func shardName(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if q := u.Query(); q.Has("addr") || q.Has("master_set") || q.Has("shard") {
		return "", errors.New("a shard must be one Redis server (no addr, master_set or nested shard)")
	}
	name := u.Host + u.Path
	if db := u.Query().Get("db"); db != "" {
		name += "?db=" + db
	}
	return name, nil
}

// Partition implements Partitioner: the shard and its Runner's partition of
// key, false when that Runner cannot tell.
func (r *ShardedRunner) Partition(key string) (uint64, bool) {
	sh := r.ShardOf(key)
	inner, ok := r.shards[sh].Runner.(Partitioner)
	if !ok {
		return 0, false
	}
	p, ok := inner.Partition(key)
	if !ok || p >= 1<<32 {
		return 0, false
	}
	return uint64(sh)<<32 | p, true
}
