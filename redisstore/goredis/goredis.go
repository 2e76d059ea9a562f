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
	"fmt"

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
}

// Run sends EVALSHA and, on NOSCRIPT, EVAL: what redis.Script.Run does, with
// the SHA-1 redisstore computed once.
func (r *runner) Run(ctx context.Context, s *redisstore.Script, keys, args []string, reply []int64) error {
	argv := toAny(args)
	cmd := r.c.EvalSha(ctx, s.SHA1(), keys, argv...)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = r.c.Eval(ctx, s.Source(), keys, argv...)
	}
	return copyReply(cmd, reply)
}

// RunMulti pipelines every EVALSHA (go-redis splits the pipeline by node on a
// Cluster), then the EVALs of those that met NOSCRIPT.
func (r *runner) RunMulti(ctx context.Context, calls []redisstore.Call) {
	cmds := make([]*redis.Cmd, len(calls))
	pipe := r.c.Pipeline()
	for i, c := range calls {
		cmds[i] = pipe.EvalSha(ctx, c.Script.SHA1(), c.Keys, toAny(c.Args)...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
			continue
		}
		calls[i].Err = copyReply(cmd, calls[i].Reply)
	}
	if len(again) == 0 {
		return
	}
	pipe = r.c.Pipeline()
	for _, i := range again {
		c := calls[i]
		cmds[i] = pipe.Eval(ctx, c.Script.Source(), c.Keys, toAny(c.Args)...)
	}
	_, _ = pipe.Exec(ctx)
	for _, i := range again {
		calls[i].Err = copyReply(cmds[i], calls[i].Reply)
	}
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

func copyReply(cmd *redis.Cmd, reply []int64) error {
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
