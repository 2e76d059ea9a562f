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

// boardChunk is how many entries one call of a post or a read handles at
// most: at 100,000 members one call would keep Redis from every other
// client for seconds, while a call of this many takes about a millisecond.
const boardChunk = 500

// PostDemand implements sluice.DemandBoard: one script run per boardChunk
// entries, all posted at the same instant. Each run is bounded by the
// store's timeout on its own.
func (s *Store) PostDemand(ctx context.Context, board string, entries []sluice.Demand, ttl time.Duration) error {
	if ttl <= 0 {
		return errors.New("redisstore: PostDemand needs a TTL above 0")
	}
	keys := []string{s.BoardKey(board)}
	now, micros := strconv.FormatInt(s.now(), 10), strconv.FormatInt(max(1, int64(ttl/time.Microsecond)), 10)
	args := make([]string, 0, 2+2*min(len(entries), boardChunk))
	for from := 0; from < len(entries); from += boardChunk {
		args = append(args[:0], now, micros)
		for _, d := range entries[from:min(from+boardChunk, len(entries))] {
			args = append(args, d.Member, strconv.FormatFloat(d.Value, 'g', -1, 64))
		}
		if err := s.runBoard(ctx, scriptBoardPost, keys, args); err != nil {
			return err
		}
	}
	return nil
}

// runBoard runs a board post within the store's timeout.
func (s *Store) runBoard(ctx context.Context, script *Script, keys, args []string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var reply [1]int64
	if err := s.run.Run(ctx, script, keys, args, reply[:]); err != nil {
		return scriptError(script, err)
	}
	return nil
}

// ReadDemand implements sluice.DemandBoard: an HSCAN of the board, one
// script run per boardChunk members or so, each dropping the expired
// entries it meets and bounded by the store's timeout on its own. So the
// read is O(members) in all but keeps Redis from other clients only for a
// chunk at a time.
func (s *Store) ReadDemand(ctx context.Context, board string) ([]sluice.Demand, error) {
	tr, ok := s.run.(TextRunner)
	if !ok {
		return nil, errNoText
	}
	keys := []string{s.BoardKey(board)}
	var out []sluice.Demand
	var seen map[string]struct{} // past the first chunk: HSCAN may return a member twice
	for cursor := "0"; ; {
		reply, err := s.readChunk(ctx, tr, keys, cursor)
		if err != nil {
			return nil, err
		}
		if len(reply)%2 != 1 {
			return nil, fmt.Errorf("redisstore: board_read replied %d strings, want a cursor and pairs", len(reply))
		}
		cursor = reply[0]
		if seen == nil && cursor != "0" {
			seen = make(map[string]struct{}, len(out)+len(reply)/2)
			for _, d := range out {
				seen[d.Member] = struct{}{}
			}
		}
		for i := 1; i < len(reply); i += 2 {
			if seen != nil {
				if _, dup := seen[reply[i]]; dup {
					continue
				}
				seen[reply[i]] = struct{}{}
			}
			v, err := strconv.ParseFloat(reply[i+1], 64)
			if err != nil {
				return nil, fmt.Errorf("redisstore: board %q member %q: %w", board, reply[i], err)
			}
			out = append(out, sluice.Demand{Member: reply[i], Value: v})
		}
		if cursor == "0" {
			return out, nil
		}
	}
}

// readChunk runs one board_read from cursor within the store's timeout.
func (s *Store) readChunk(ctx context.Context, tr TextRunner, keys []string, cursor string) ([]string, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	reply, err := tr.RunText(ctx, scriptBoardRead, keys, []string{strconv.FormatInt(s.now(), 10), cursor, strconv.Itoa(boardChunk)})
	if err != nil {
		return nil, scriptError(scriptBoardRead, err)
	}
	return reply, nil
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
