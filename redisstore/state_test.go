package redisstore_test

import (
	"context"
	"encoding/binary"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
	"github.com/sluicehq/sluice/storetest"
)

// testTextState: a key holding the decimal text state of an earlier version
// ("a:b" and so on) is read as that state: 3 of 10 units used there leave 6
// after one more admission, and the write is the packed state.
func testTextState(t *testing.T, c rueidis.Client) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	clock := storetest.NewClock(now)
	s := redisstore.New(c, append(rstest.Defaults(), redisstore.WithClock(clock))...)
	us := now.UnixMicro()
	T := (time.Minute / 10).Microseconds()
	i := strconv.FormatInt
	text := map[sluice.Algorithm]string{
		sluice.FixedWindow:   i(us, 10) + ":3",
		sluice.SlidingWindow: i(us, 10) + ":3:0",
		sluice.TokenBucket:   i(us, 10) + ":" + i(3*T, 10),
		sluice.GCRA:          i(us+3*T, 10),
		sluice.LeakyBucket:   i(us+3*T, 10),
	}
	for a, state := range text {
		p := &sluice.Policy{Name: "text", Algorithm: a, Limit: 10, Period: time.Minute}
		key := s.Key(p, "k")
		if err := c.Do(ctx, c.B().Set().Key(key).Value(state).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		r, err := s.Decide(ctx, sluice.Request{Policy: p, Key: "k", Cost: 1})
		if err != nil || !r.Allowed || r.Remaining != 6 {
			t.Errorf("%s on text state %q: %+v, %v; want allowed, 6 remaining", a, state, r, err)
			continue
		}
		v, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
		if err != nil || len(v) == 0 || v[0] != 0 {
			t.Errorf("%s: state after the write %q, %v; want the packed state", a, v, err)
		}
	}
}

func pack(vals ...float64) string {
	b := make([]byte, 0, 8*len(vals))
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return string(b)
}

func TestDecodeReply(t *testing.T) {
	reply := make([]int64, 3)
	if err := redisstore.DecodeReply(pack(1, -5, 1<<53-1), reply); err != nil || reply[0] != 1 || reply[1] != -5 || reply[2] != 1<<53-1 {
		t.Errorf("DecodeReply = %v, %v", reply, err)
	}
	for _, bad := range []string{"", pack(1, 2), pack(1, 2, 3, 4), pack(1, 2) + "x"} {
		if err := redisstore.DecodeReply(bad, reply); err == nil {
			t.Errorf("DecodeReply of %d bytes into 3 values: no error", len(bad))
		}
	}
}

// FuzzDecodeReply: any input either fails cleanly on its length or decodes
// every integer that was packed, unchanged.
func FuzzDecodeReply(f *testing.F) {
	f.Add(int64(0), int64(1), int64(-1), []byte{})
	f.Add(int64(1<<53-1), int64(-(1<<53 - 1)), int64(123456789), []byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, a, b, c int64, junk []byte) {
		reply := make([]int64, 3)
		if err := redisstore.DecodeReply(string(junk), reply); (err == nil) != (len(junk) == 24) {
			t.Fatalf("%d bytes: err %v", len(junk), err)
		}
		const lim = 1 << 53
		a, b, c = a%lim, b%lim, c%lim
		if err := redisstore.DecodeReply(pack(float64(a), float64(b), float64(c)), reply); err != nil || reply[0] != a || reply[1] != b || reply[2] != c {
			t.Fatalf("DecodeReply(pack(%d, %d, %d)) = %v, %v", a, b, c, reply, err)
		}
	})
}
