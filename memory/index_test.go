package memory

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// The shard's index agrees with a plain map through any sequence of
// insertions and removals (slots shifting as others are removed), also when
// many hashes share a tag or are equal outright, and its probe sequences
// stay short.
func TestIndexMatchesAMap(t *testing.T) {
	for _, tags := range []uint64{1, 3, 1 << 32} { // how many distinct tags the hashes have
		t.Run(strconv.FormatUint(tags, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(tags, 7))
			sh := newTestShard()
			u := &usage{name: "p"}
			p := &sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
			res := sluice.Result{ResetAfter: 1000}
			want := map[string]int64{} // key → the state's Time
			hashOf := func(key string) uint64 {
				n, _ := strconv.ParseUint(key[1:], 10, 64)
				// Keys 2m and 2m+1 share the low bits, and with one tag
				// their whole hash; the tag takes only `tags` values.
				return (n*0x9e3779b97f4a7c15%tags)<<32 | n%(1<<32-1)/2
			}
			for step := range 20_000 {
				key := "k" + strconv.Itoa(rng.IntN(500))
				h := hashOf(key)
				var id entryKey
				id.set(p, key)
				i, found := sh.find(h, &id)
				if _, ok := want[key]; ok != found {
					t.Fatalf("step %d: %s found %v, want %v", step, key, found, ok)
				}
				switch {
				case found && sh.at(i).time != want[key]:
					t.Fatalf("step %d: %s found another entry", step, key)
				case found && rng.IntN(2) == 0:
					sh.remove(i)
					delete(want, key)
				case !found:
					want[key] = int64(step)
					sh.insert(h, id, u, p, &sluice.State{Time: int64(step)}, &res, 0, 0)
				}
				if sh.index.used != len(sh.owned) || len(sh.owned) != len(want) {
					t.Fatalf("step %d: index holds %d, shard %d, want %d", step, sh.index.used, len(sh.owned), len(want))
				}
			}
			if tags == 1<<32 {
				if longest := longestProbe(&sh.index); longest > 32 {
					t.Fatalf("a probe sequence of %d slots", longest)
				}
			}
		})
	}
}

// longestProbe is how far the furthest slot sits from its home.
func longestProbe(x *index) int {
	mask, longest := len(x.slots)-1, 0
	for i, slot := range x.slots {
		if slot != 0 {
			longest = max(longest, (i-x.home(slot))&mask)
		}
	}
	return longest
}
