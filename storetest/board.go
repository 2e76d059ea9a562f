package storetest

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// RunBoard runs the demand board cases alone, for a layer over a store
// (Run runs them too): a store that implements sluice.DemandBoard keeps each member's
// latest value, live for its TTL on the store's clock, per board; it returns
// members and values exactly as posted, and forgets expired ones.
func RunBoard(t *testing.T, open Opener) {
	e := newEnv(t, open)
	b, ok := e.h.Store.(sluice.DemandBoard)
	if !ok {
		t.Skip("the store does not implement sluice.DemandBoard")
	}
	read := func(board string) map[string]float64 {
		t.Helper()
		ds, err := b.ReadDemand(e.ctx, board)
		if err != nil {
			t.Fatalf("ReadDemand(%q) at %v: %v", board, e.clock.Now().Sub(Epoch), err)
		}
		got := map[string]float64{}
		for _, d := range ds {
			if _, dup := got[d.Member]; dup {
				t.Fatalf("ReadDemand(%q) returned member %q twice", board, d.Member)
			}
			got[d.Member] = d.Value
		}
		return got
	}
	post := func(board string, ttl time.Duration, ds ...sluice.Demand) {
		t.Helper()
		if err := b.PostDemand(e.ctx, board, ds, ttl); err != nil {
			t.Fatalf("PostDemand(%q) at %v: %v", board, e.clock.Now().Sub(Epoch), err)
		}
	}
	want := func(board string, w map[string]float64) {
		t.Helper()
		if got := read(board); !maps.Equal(got, w) {
			t.Fatalf("board %q at %v: %v, want %v", board, e.clock.Now().Sub(Epoch), got, w)
		}
	}

	want("none", map[string]float64{})
	e.at(0)
	post("b1", time.Second, sluice.Demand{Member: "a", Value: 0.25}, sluice.Demand{Member: "b", Value: 1e9 + 0.5})
	post("b2", 3*time.Second, sluice.Demand{Member: "a", Value: 7})
	post("b1", time.Second) // no entries: nothing changes
	want("b1", map[string]float64{"a": 0.25, "b": 1e9 + 0.5})
	e.at(500 * time.Millisecond)
	post("b1", time.Second, sluice.Demand{Member: "a", Value: 3})
	want("b1", map[string]float64{"a": 3, "b": 1e9 + 0.5})
	e.at(time.Second - time.Microsecond)
	want("b1", map[string]float64{"a": 3, "b": 1e9 + 0.5})
	e.at(time.Second) // b's TTL has passed; a's renewal has not
	want("b1", map[string]float64{"a": 3})
	e.at(1500 * time.Millisecond)
	want("b1", map[string]float64{})
	want("b2", map[string]float64{"a": 7}) // boards are apart
	post("b1", time.Second, sluice.Demand{Member: "a", Value: 0})
	want("b1", map[string]float64{"a": 0}) // an expired member comes back when posted
	e.at(3 * time.Second)
	want("b2", map[string]float64{})

	if err := b.PostDemand(e.ctx, "b1", []sluice.Demand{{Member: "a", Value: 1}}, 0); err == nil {
		t.Fatal("PostDemand with a TTL of 0: no error")
	}

	// Members are any bytes, values any finite float, and a board holds many.
	many := map[string]float64{"with space": 1.5, "colon:and\x00nul": -2, "ünïcode": 1e-9, "\n": 42}
	var ds []sluice.Demand
	for i := range 1000 {
		many[fmt.Sprintf("tenant-%d", i)] = float64(i) / 3
	}
	for m, v := range many {
		ds = append(ds, sluice.Demand{Member: m, Value: v})
	}
	post("many", time.Minute, ds...)
	want("many", many)

	// A board read in parts drops the expired entries of every part: 1,000
	// members expire among 600 renewed ones.
	var renewed []sluice.Demand
	live := map[string]float64{}
	for i := range 600 {
		m := fmt.Sprintf("tenant-%d", i*7%1000)
		renewed = append(renewed, sluice.Demand{Member: m, Value: float64(i)})
		live[m] = float64(i)
	}
	e.at(3*time.Second + time.Minute - time.Millisecond)
	post("many", time.Hour, renewed...)
	e.at(3*time.Second + time.Minute)
	want("many", live)

	// Entries live for their TTL on the store's clock however much real
	// time passes: a test's or a simulation's clock may run far slower than
	// real time, and a store that dropped a board in real time (Redis, by
	// its key's expiry) would lose entries still live on that clock, as if
	// their nodes had stopped. So real time passes here, on purpose, while
	// the store's clock stands still.
	post("slow", 5*time.Millisecond, sluice.Demand{Member: "a", Value: 1})
	time.Sleep(30 * time.Millisecond)
	want("slow", map[string]float64{"a": 1})
	e.at(3*time.Second + time.Minute + 5*time.Millisecond)
	want("slow", map[string]float64{})
}
