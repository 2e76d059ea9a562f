// Package goredis runs the Redis store of package redisstore on a go-redis
// client (github.com/redis/go-redis/v9), for applications that already use
// go-redis. The scripts, key layout and semantics are redisstore's own; only
// this package imports go-redis, so rueidis users never compile it.
//
// go-redis retries a command after a network error (Options.MaxRetries,
// 3 by default): a decision whose reply was lost may then be applied twice,
// consuming twice what was asked — stricter than the limit, never looser. Set
// MaxRetries to -1 on a client dedicated to the store to rule that out.
//
//	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs})
//	store := goredis.New(rdb)
//	lim, err := sluice.New(store, policy)
package goredis

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/redisstore"
)

// New returns a redisstore.Store on client, which the caller owns and closes
// (Store.Close leaves it open). client may be a *redis.Client (one Redis, or
// Sentinel via redis.NewFailoverClient), a *redis.ClusterClient or a
// *redis.Ring. On a Ring, and on any other UniversalClient, all-or-nothing
// checks over several keys always take the cross-slot path, because where a
// Ring puts a key is not Redis Cluster's slot.
func New(client redis.UniversalClient, opts ...redisstore.Option) *redisstore.Store {
	return redisstore.NewWithRunner(NewRunner(client), opts...)
}

// NewRunner returns the redisstore.Runner that New uses, for callers that
// wrap it (instrumentation, tests).
func NewRunner(client redis.UniversalClient) redisstore.Runner {
	r := &runner{c: client}
	switch client.(type) {
	case *redis.Client:
		r.single = true
	case *redis.ClusterClient:
		r.cluster = true
	}
	return r
}

type runner struct {
	c       redis.UniversalClient
	single  bool // every key is on one server
	cluster bool // keys are placed by Redis Cluster hash slot
	fn      redisstore.Functions
}

// Mode implements redisstore.Runner.
func (r *runner) Mode(ctx context.Context) (redisstore.Mode, error) { return r.fn.Mode(ctx, r.load) }

// ModeReason says why Mode is what it is (see redisstore.Store.ModeReason).
func (r *runner) ModeReason() string { return r.fn.Reason() }

// Run sends FCALL in ModeFunctions; otherwise EVALSHA and, on NOSCRIPT, EVAL:
// what redis.Script.Run does, with the SHA-1 redisstore computed once.
func (r *runner) Run(ctx context.Context, s *redisstore.Script, keys, args []string, reply []int64) error {
	m, err := r.fn.Mode(ctx, r.load)
	if err != nil {
		return err
	}
	argv := toAny(args)
	if m == redisstore.ModeFunctions {
		if m, err = r.fn.Call(ctx, r.load, func() error {
			return copyReply(r.c.FCall(ctx, s.Function(), keys, argv...), reply)
		}); m != redisstore.ModeScripts {
			return err
		}
	}
	cmd := r.c.EvalSha(ctx, s.SHA1(), keys, argv...)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = r.c.Eval(ctx, s.Source(), keys, argv...)
	}
	return copyReply(cmd, reply)
}

// RunText implements redisstore.TextRunner, for the demand boards: as Run,
// with a reply of strings.
func (r *runner) RunText(ctx context.Context, s *redisstore.Script, keys, args []string) ([]string, error) {
	m, err := r.fn.Mode(ctx, r.load)
	if err != nil {
		return nil, err
	}
	argv := toAny(args)
	if m == redisstore.ModeFunctions {
		var out []string
		if m, err = r.fn.Call(ctx, r.load, func() (err error) {
			out, err = r.c.FCall(ctx, s.Function(), keys, argv...).StringSlice()
			return err
		}); m != redisstore.ModeScripts {
			return out, err
		}
	}
	cmd := r.c.EvalSha(ctx, s.SHA1(), keys, argv...)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = r.c.Eval(ctx, s.Source(), keys, argv...)
	}
	return cmd.StringSlice()
}

// load loads the library on every master that lacks it (each holds its own
// functions; replicas get theirs from their master).
func (r *runner) load(ctx context.Context) error {
	name, src := redisstore.Library()
	var mu sync.Mutex
	errs := map[string]error{}
	loadOn := func(ctx context.Context, n *redis.Client) error {
		libs, err := n.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: name}).Result()
		if err != nil || len(libs) == 0 {
			err = functionLoad(ctx, n, src)
		}
		mu.Lock()
		errs[n.String()] = err
		mu.Unlock()
		return nil
	}
	switch c := r.c.(type) {
	case *redis.ClusterClient:
		_ = c.ForEachMaster(ctx, loadOn)
	case *redis.Ring:
		_ = c.ForEachShard(ctx, loadOn)
	case *redis.Client:
		_ = loadOn(ctx, c)
	default:
		errs["server"] = functionLoad(ctx, r.c, src)
	}
	return redisstore.LoadResult(errs)
}

// functionLoad loads the library src on c, marking the server's error
// replies as such for redisstore.LoadResult.
func functionLoad(ctx context.Context, c redis.Cmdable, src string) error {
	err := c.FunctionLoadReplace(ctx, src).Err()
	if _, reply := errors.AsType[redis.Error](err); reply {
		return redisstore.ServerReply(err)
	}
	return err
}

// RunMulti pipelines every call (go-redis splits the pipeline by node on a
// Cluster): FCALLs in ModeFunctions, else EVALSHAs and then the EVALs of
// those that met NOSCRIPT.
func (r *runner) RunMulti(ctx context.Context, calls []redisstore.Call) {
	m, err := r.fn.Mode(ctx, r.load)
	if err != nil {
		for i := range calls {
			calls[i].Err = err
		}
		return
	}
	fcall := func(p redis.Pipeliner, c redisstore.Call) *redis.Cmd {
		return p.FCall(ctx, c.Script.Function(), c.Keys, toAny(c.Args)...)
	}
	if m == redisstore.ModeFunctions {
		again := r.pipeline(ctx, calls, nil, fcall)
		r.fn.RetryMulti(ctx, r.load, again, func(i int) error { return calls[i].Err },
			func(idx []int) []int { return r.pipeline(ctx, calls, idx, fcall) },
			func(idx []int) { r.evalMulti(ctx, calls, idx) })
		return
	}
	r.evalMulti(ctx, calls, nil)
}

// evalMulti runs calls idx (all when nil) by EVALSHA, then EVAL on NOSCRIPT.
func (r *runner) evalMulti(ctx context.Context, calls []redisstore.Call, idx []int) {
	again := r.pipeline(ctx, calls, idx, func(p redis.Pipeliner, c redisstore.Call) *redis.Cmd {
		return p.EvalSha(ctx, c.Script.SHA1(), c.Keys, toAny(c.Args)...)
	})
	if len(again) > 0 {
		r.pipeline(ctx, calls, again, func(p redis.Pipeliner, c redisstore.Call) *redis.Cmd {
			return p.Eval(ctx, c.Script.Source(), c.Keys, toAny(c.Args)...)
		})
	}
}

// pipeline sends calls idx (all when nil) built by cmd in one pipeline, sets
// their replies and errors, and returns the indexes of those that failed
// because the server lacks the function or the script, for the caller to
// retry otherwise.
func (r *runner) pipeline(ctx context.Context, calls []redisstore.Call, idx []int, cmd func(redis.Pipeliner, redisstore.Call) *redis.Cmd) []int {
	if idx == nil {
		idx = make([]int, len(calls))
		for i := range idx {
			idx[i] = i
		}
	}
	cmds := make([]*redis.Cmd, len(idx))
	pipe := r.c.Pipeline()
	for j, i := range idx {
		cmds[j] = cmd(pipe, calls[i])
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	var again []int
	for j, c := range cmds {
		i := idx[j]
		calls[i].Err = copyReply(c, calls[i].Reply)
		if err := c.Err(); redis.HasErrorPrefix(err, "NOSCRIPT") || redisstore.FunctionMissing(err) || redisstore.FunctionsRefused(err) {
			again = append(again, i)
		}
	}
	return again
}

// Colocated: one server holds every key; a Cluster needs one slot; elsewhere
// (a Ring) placement is unknown, so only a single key counts as colocated.
func (r *runner) Colocated(keys []string) bool {
	if r.single || len(keys) < 2 {
		return true
	}
	if !r.cluster {
		return false
	}
	slot := redisstore.Slot(keys[0])
	for _, k := range keys[1:] {
		if redisstore.Slot(k) != slot {
			return false
		}
	}
	return true
}

func toAny(args []string) []any {
	a := make([]any, len(args))
	for i, s := range args {
		a[i] = s
	}
	return a
}

// copyReply copies an integer array reply, or a packed one, into reply.
func copyReply(cmd *redis.Cmd, reply []int64) error {
	if s, ok := cmd.Val().(string); ok && cmd.Err() == nil {
		return redisstore.DecodeReply(s, reply)
	}
	vals, err := cmd.Int64Slice()
	if err != nil {
		return err
	}
	if len(vals) != len(reply) {
		return fmt.Errorf("script replied %d values, want %d", len(vals), len(reply))
	}
	copy(reply, vals)
	return nil
}

// Partition implements redisstore.Partitioner: one server holds every key; a
// Cluster places them by slot; elsewhere (a Ring) placement is unknown.
func (r *runner) Partition(key string) (uint64, bool) {
	switch {
	case r.single:
		return 0, true
	case r.cluster:
		return uint64(redisstore.Slot(key)), true
	}
	return 0, false
}
