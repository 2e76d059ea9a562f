package redisstore_test

import (
	"context"
	_ "embed" // the prototype's Lua
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

var (
	//go:embed testdata/hashstate_store.lua
	hashStateStore string
	//go:embed testdata/hashstate_batch.lua
	hashStateBatch string
)

// BenchmarkStateLayout: what Redis spends on a call of 32 GCRA decisions (a
// batch as the store coalesces them under load) on 32 of 10,000 uniform
// keys, each admitted and written, with the state laid out two ways:
//   - keys: the store's own layout and script, a string key per (policy,
//     key), decide_batch's 'm' record: one MGET, then a SET … PXAT per
//     decision;
//   - hash: a prototype (testdata/hashstate_*.lua) in which the states are
//     fields of one hash: one HMGET and one HSET per call. It does not expire
//     single fields, which a store built this way would have to do itself.
//
// Both decide with gcra.lua. 64 goroutines send FCALL directly; it reports
// the Redis CPU per decision (INFO cpu over the timed loop).
//
//	go test -run '^$' -bench BenchmarkStateLayout -benchtime 20000x ./redisstore/
func BenchmarkStateLayout(b *testing.B) {
	srv := redistest.Start(b)
	c := newClient(b, srv.URL())
	ctx := context.Background()
	name, lib := redisstore.Library()
	for _, src := range []string{lib, redisstore.HashStateLibrary(hashStateStore, hashStateBatch)} {
		if err := c.Do(ctx, c.B().FunctionLoad().Replace().FunctionCode(src).Build()).Error(); err != nil {
			b.Fatal(err)
		}
	}
	// A reply is 5 little-endian doubles per decision, allowed first.
	const batch, keys, stride = 32, 10000, 5 * 8
	// GCRA at 1,000,000 a second: P, L, C and T (µs); every request admits.
	policy := []string{"1000000", "1000000", "1000000", "1"}
	// pick names the 32 keys of call i, the same for both layouts.
	pick := func(i int, format string) []string {
		r := rand.New(rand.NewPCG(uint64(i), 0))
		ks := make([]string, batch)
		for j := range ks {
			ks[j] = fmt.Sprintf(format, r.IntN(keys))
		}
		return ks
	}
	layouts := []struct {
		name string
		call func(i int) rueidis.Completed
	}{
		{"keys", func(i int) rueidis.Completed {
			args := append(append([]string{"", "gc"}, policy...), "m", strconv.Itoa(batch), "1")
			return c.B().Fcall().Function(name + "_gc_batch").Numkeys(batch).Key(pick(i, "sluice:{layout:k%d}:gc")...).Arg(args...).Build()
		}},
		{"hash", func(i int) rueidis.Completed {
			args := append(append(append([]string{""}, policy...), "1"), pick(i, "layout:k%d")...)
			return c.B().Fcall().Function("sluice_hashstate_batch").Numkeys(1).Key("sluice:{layout}:gc").Arg(args...).Build()
		}},
	}
	for _, l := range layouts {
		b.Run(l.name, func(b *testing.B) {
			if err := c.Do(ctx, c.B().Flushall().Build()).Error(); err != nil {
				b.Fatal(err)
			}
			perOp(b, []*redistest.Server{srv}, "decision", batch, func(i int) error {
				reply, err := c.Do(ctx, l.call(i)).AsBytes()
				if err != nil {
					return err
				}
				if len(reply) != batch*stride {
					return fmt.Errorf("a reply of %d bytes, want %d", len(reply), batch*stride)
				}
				for j := range batch {
					if math.Float64frombits(binary.LittleEndian.Uint64(reply[j*stride:])) != 1 {
						return fmt.Errorf("decision %d of call %d was denied", j, i)
					}
				}
				return nil
			})
		})
	}
}
