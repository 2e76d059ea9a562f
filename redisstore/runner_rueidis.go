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
	fn      Functions
	nodes   *clusterNodes // a Cluster's slot map (clusternodes.go); nil otherwise
}

// NewRunner returns the Runner that New uses on a rueidis client, for callers
// that wrap it (instrumentation, tests).
func NewRunner(c rueidis.Client) Runner { return newRueidisRunner(c) }

func newRueidisRunner(c rueidis.Client) *rueidisRunner {
	r := &rueidisRunner{c: c, cluster: c.Mode() == rueidis.ClientModeCluster}
	if r.cluster {
		r.nodes = newClusterNodes(c, nodesRefresh)
	}
	return r
}

// Mode implements Runner.
func (r *rueidisRunner) Mode(ctx context.Context) (Mode, error) { return r.fn.Mode(ctx, r.load) }

// ModeReason says why Mode is what it is.
func (r *rueidisRunner) ModeReason() string { return r.fn.Reason() }

// Run sends FCALL in ModeFunctions; otherwise rueidis.Lua, which sends
// EVALSHA and falls back to EVAL on NOSCRIPT.
func (r *rueidisRunner) Run(ctx context.Context, s *Script, keys, args []string, reply []int64) error {
	m, err := r.fn.Mode(ctx, r.load)
	if err != nil {
		return err
	}
	if m == ModeFunctions {
		if m, err = r.fn.Call(ctx, r.load, func() error {
			return copyReply(r.checked(r.c.Do(ctx, r.fcall(s, keys, args))), reply)
		}); m != ModeScripts {
			return err
		}
	}
	return copyReply(r.checked(s.lua.Exec(ctx, r.c, keys, args)), reply)
}

// checked returns res, first asking for a fresh slot map on a Cluster when
// res failed in a way that says the map may have changed.
func (r *rueidisRunner) checked(res rueidis.RedisResult) rueidis.RedisResult {
	if r.nodes != nil && mapMayBeStale(res.Error()) {
		r.nodes.stale()
	}
	return res
}

func (r *rueidisRunner) fcall(s *Script, keys, args []string) rueidis.Completed {
	return r.c.B().Fcall().Function(s.fn).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// load loads the library on every node that lacks it: on a Cluster each
// master holds its own functions (replicas get theirs from their master).
// Compiling the library costs the server a few milliseconds, so a node that
// has it (another process loaded it) is only asked.
func (r *rueidisRunner) load(ctx context.Context) error {
	name, src := Library()
	errs := map[string]error{}
	for addr, n := range r.c.Nodes() {
		libs, err := n.Do(ctx, n.B().FunctionList().Libraryname(name).Build()).ToArray()
		if err == nil && len(libs) > 0 {
			errs[addr] = nil
			continue
		}
		err = n.Do(ctx, n.B().FunctionLoad().Replace().FunctionCode(src).Build()).Error()
		if _, reply := rueidis.IsRedisErr(err); reply {
			err = ServerReply(err)
		}
		errs[addr] = err
	}
	return LoadResult(errs)
}

// RunMulti sends every call in one DoMulti (rueidis splits it by node on a
// Cluster and pipelines each part): FCALLs in ModeFunctions, else EVALSHAs
// and then, together, the EVALs of those that met NOSCRIPT. Lua.ExecMulti is
// not used: it would SCRIPT LOAD on every node first, a round trip per call.
func (r *rueidisRunner) RunMulti(ctx context.Context, calls []Call) {
	m, err := r.fn.Mode(ctx, r.load)
	if err != nil {
		for i := range calls {
			calls[i].Err = err
		}
		return
	}
	if m == ModeFunctions {
		// As Functions.Call: the library may go missing again between its
		// load and the calls run after it (a FUNCTION FLUSH, a fail-over).
		again := r.doMulti(ctx, calls, nil, r.fcall)
		r.fn.RetryMulti(ctx, r.load, again, func(i int) error { return calls[i].Err },
			func(idx []int) []int { return r.doMulti(ctx, calls, idx, r.fcall) },
			func(idx []int) { r.evalMulti(ctx, calls, idx) })
		return
	}
	r.evalMulti(ctx, calls, nil)
}

// evalMulti runs calls idx (all when nil) by EVALSHA, then EVAL on NOSCRIPT.
func (r *rueidisRunner) evalMulti(ctx context.Context, calls []Call, idx []int) {
	evalsha := func(s *Script, keys, args []string) rueidis.Completed {
		return r.c.B().Evalsha().Sha1(s.sha1).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	}
	eval := func(s *Script, keys, args []string) rueidis.Completed {
		return r.c.B().Eval().Script(s.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	}
	if again := r.doMulti(ctx, calls, idx, evalsha); len(again) > 0 {
		r.doMulti(ctx, calls, again, eval)
	}
}

// doMulti sends calls idx (all when nil) built by cmd, pipelined, sets their
// replies and errors, and returns the indexes of those that failed because
// the server lacks the function or the script (FunctionMissing, NOSCRIPT, or
// a refusal of Functions), for the caller to retry otherwise.
func (r *rueidisRunner) doMulti(ctx context.Context, calls []Call, idx []int, cmd func(*Script, []string, []string) rueidis.Completed) []int {
	if idx == nil {
		idx = make([]int, len(calls))
		for i := range idx {
			idx[i] = i
		}
	}
	cmds := make(rueidis.Commands, len(idx))
	for j, i := range idx {
		cmds[j] = cmd(calls[i].Script, calls[i].Keys, calls[i].Args)
	}
	var again []int
	for j, res := range r.c.DoMulti(ctx, cmds...) {
		i := idx[j]
		calls[i].Err = copyReply(r.checked(res), calls[i].Reply)
		if e, ok := rueidis.IsRedisErr(res.Error()); ok && (e.IsNoScript() || FunctionMissing(e) || FunctionsRefused(e)) {
			again = append(again, i)
		}
	}
	return again
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

// copyReply copies an integer array reply, or a packed one, into reply.
func copyReply(res rueidis.RedisResult, reply []int64) error {
	msg, err := res.ToMessage()
	if err != nil {
		return err
	}
	if msg.IsString() {
		s, _ := msg.ToString()
		return DecodeReply(s, reply)
	}
	arr, err := msg.ToArray()
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

// Partition implements Partitioner: one partition on a standalone or
// Sentinel-managed Redis, a slot's on a Cluster.
func (r *rueidisRunner) Partition(key string) (uint64, bool) {
	if r.cluster {
		return uint64(Slot(key)), true
	}
	return 0, true
}
