package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"
)

// rueidisRunner runs the scripts on a rueidis client, which pipelines
// concurrent calls on shared connections by itself.
type rueidisRunner struct {
	c       rueidis.Client
	cluster bool
}

// NewRunner returns the Runner that New uses on a rueidis client, for callers
// that wrap it (instrumentation, tests).
func NewRunner(c rueidis.Client) Runner { return newRueidisRunner(c) }

func newRueidisRunner(c rueidis.Client) *rueidisRunner {
	return &rueidisRunner{c: c, cluster: c.Mode() == rueidis.ClientModeCluster}
}

// Run uses rueidis.Lua, which sends EVALSHA and falls back to EVAL on NOSCRIPT.
func (r *rueidisRunner) Run(ctx context.Context, s *Script, keys, args []string, reply []int64) error {
	return copyReply(s.lua.Exec(ctx, r.c, keys, args), reply)
}

// RunMulti sends every EVALSHA in one DoMulti (rueidis splits it by node on a
// Cluster and pipelines each part), then the EVALs of those that met
// NOSCRIPT, again together. Lua.ExecMulti is not used: it would SCRIPT LOAD
// on every node first, a round trip per call.
func (r *rueidisRunner) RunMulti(ctx context.Context, calls []Call) {
	cmds := make(rueidis.Commands, len(calls))
	for i, c := range calls {
		cmds[i] = r.c.B().Evalsha().Sha1(c.Script.sha1).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()
	}
	var again []int
	for i, res := range r.c.DoMulti(ctx, cmds...) {
		if e, ok := rueidis.IsRedisErr(res.Error()); ok && e.IsNoScript() {
			again = append(again, i)
			continue
		}
		calls[i].Err = copyReply(res, calls[i].Reply)
	}
	if len(again) == 0 {
		return
	}
	cmds = cmds[:0]
	for _, i := range again {
		c := calls[i]
		cmds = append(cmds, r.c.B().Eval().Script(c.Script.src).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build())
	}
	for j, res := range r.c.DoMulti(ctx, cmds...) {
		calls[again[j]].Err = copyReply(res, calls[again[j]].Reply)
	}
}

// Colocated: a standalone or Sentinel-managed Redis holds every key; on a
// Cluster the keys must share a slot (rueidis would refuse them otherwise).
func (r *rueidisRunner) Colocated(keys []string) bool {
	if !r.cluster || len(keys) < 2 {
		return true
	}
	slot := Slot(keys[0])
	for _, k := range keys[1:] {
		if Slot(k) != slot {
			return false
		}
	}
	return true
}

// copyReply copies an integer array reply into reply.
func copyReply(res rueidis.RedisResult, reply []int64) error {
	arr, err := res.ToArray()
	if err != nil {
		return err
	}
	if len(arr) != len(reply) {
		return fmt.Errorf("script replied %d values, want %d", len(arr), len(reply))
	}
	for i := range arr {
		if reply[i], err = arr[i].ToInt64(); err != nil {
			return err
		}
	}
	return nil
}
