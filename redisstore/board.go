package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// The demand board scripts (board.lua).
var (
	scriptBoardPost = scripts["board_post"]
	scriptBoardRead = scripts["board_read"]
)

// TextRunner is implemented by Runners that can return a script's reply of
// strings, which the demand boards need (member names); a Store on a Runner
// without it reports that it cannot keep boards.
type TextRunner interface {
	// RunText runs s once with keys and args, as Run does, and returns its
	// reply, an array of strings.
	RunText(ctx context.Context, s *Script, keys, args []string) ([]string, error)
}

var errNoText = errors.New("redisstore: the store's Runner cannot return text replies (TextRunner), so it keeps no demand boards")

// BoardKey returns the Redis key of a demand board: one hash, so one slot
// on a Cluster.
func (s *Store) BoardKey(board string) string { return s.prefix + "board:{" + board + "}" }

// PostDemand implements sluice.DemandBoard: one script run, whatever the
// number of entries.
func (s *Store) PostDemand(ctx context.Context, board string, entries []sluice.Demand, ttl time.Duration) error {
	if ttl <= 0 {
		return errors.New("redisstore: PostDemand needs a TTL above 0")
	}
	if len(entries) == 0 {
		return nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	args := make([]string, 0, 2+2*len(entries))
	args = append(args, strconv.FormatInt(s.now(), 10), strconv.FormatInt(max(1, int64(ttl/time.Microsecond)), 10))
	for _, d := range entries {
		args = append(args, d.Member, strconv.FormatFloat(d.Value, 'g', -1, 64))
	}
	var reply [1]int64
	if err := s.run.Run(ctx, scriptBoardPost, []string{s.BoardKey(board)}, args, reply[:]); err != nil {
		return scriptError(scriptBoardPost, err)
	}
	return nil
}

// ReadDemand implements sluice.DemandBoard: one script run, reading the
// whole board (O(members)) and dropping its expired entries.
func (s *Store) ReadDemand(ctx context.Context, board string) ([]sluice.Demand, error) {
	tr, ok := s.run.(TextRunner)
	if !ok {
		return nil, errNoText
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	reply, err := tr.RunText(ctx, scriptBoardRead, []string{s.BoardKey(board)}, []string{strconv.FormatInt(s.now(), 10)})
	if err != nil {
		return nil, scriptError(scriptBoardRead, err)
	}
	if len(reply)%2 != 0 {
		return nil, fmt.Errorf("redisstore: board_read replied %d strings, want pairs", len(reply))
	}
	out := make([]sluice.Demand, 0, len(reply)/2)
	for i := 0; i < len(reply); i += 2 {
		v, err := strconv.ParseFloat(reply[i+1], 64)
		if err != nil {
			return nil, fmt.Errorf("redisstore: board %q member %q: %w", board, reply[i], err)
		}
		out = append(out, sluice.Demand{Member: reply[i], Value: v})
	}
	return out, nil
}

// RunText implements TextRunner as Run does: FCALL in ModeFunctions, else
// EVALSHA, then EVAL on NOSCRIPT.
func (r *rueidisRunner) RunText(ctx context.Context, s *Script, keys, args []string) ([]string, error) {
	m, err := r.fn.Mode(ctx, r.load)
	if err != nil {
		return nil, err
	}
	if m == ModeFunctions {
		var out []string
		if m, err = r.fn.Call(ctx, r.load, func() (err error) {
			out, err = r.checked(r.c.Do(ctx, r.fcall(s, keys, args))).AsStrSlice()
			return err
		}); m != ModeScripts {
			return out, err
		}
	}
	return r.checked(s.lua.Exec(ctx, r.c, keys, args)).AsStrSlice()
}

// RunText implements TextRunner once the client is dialled.
func (l *lazyRunner) RunText(ctx context.Context, s *Script, keys, args []string) ([]string, error) {
	r, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return r.RunText(ctx, s, keys, args)
}

// RunText implements TextRunner on the shard of keys[0], when that shard's
// Runner does.
func (r *ShardedRunner) RunText(ctx context.Context, s *Script, keys, args []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, errors.New("redisstore: a sharded store cannot run a script without keys")
	}
	sh := r.ShardOf(keys[0])
	tr, ok := r.shards[sh].Runner.(TextRunner)
	if !ok {
		return nil, errNoText
	}
	out, err := tr.RunText(ctx, s, keys, args)
	if err != nil {
		return nil, r.failed(sh, keys[0], err)
	}
	return out, nil
}
