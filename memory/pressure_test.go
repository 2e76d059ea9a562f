package memory_test

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// While the exact part is full the store says so in its log, at most once a
// minute (of its clock) however many keys go to the compact part, and as an
// error once the compact part overflows too.
func TestPressureIsLoggedOnceAMinute(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	s := memory.New(memory.WithClock(clock), memory.WithMaxKeys(256), memory.WithLogger(log))
	l := mustLimiter(t, s, sluice.Policy{Name: "login", Algorithm: sluice.GCRA, Limit: 5, Period: time.Hour})
	ctx := context.Background()
	send := func(prefix string, n int) {
		for i := range n {
			if _, err := l.Allow(ctx, prefix+strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	lines := func(level, msg string) int { return strings.Count(out.String(), "level="+level+" msg=\""+msg) }
	const full, saturated = "memory store full", "memory store saturated"

	send("a", 100) // room for all
	if out.Len() != 0 {
		t.Fatalf("logged with room to spare:\n%s", &out)
	}
	send("b", 1000) // the exact part fills, keys go to the compact part
	if lines("WARN", full) != 1 {
		t.Fatalf("want one warning after the first spill:\n%s", &out)
	}
	clock.Advance(59 * time.Second)
	send("c", 1000)
	if lines("WARN", full) != 1 {
		t.Fatalf("want still one warning within the minute:\n%s", &out)
	}
	clock.Advance(time.Second)
	send("d", 1)
	if lines("WARN", full) != 2 || !strings.Contains(out.String(), "compact_keys=") {
		t.Fatalf("want a second warning a minute later, with the counts:\n%s", &out)
	}
	clock.Advance(time.Minute)
	send("e", 10_000) // 4,096 slots: the compact part overflows
	if st := s.Stats(); st.Folded == 0 || lines("ERROR", saturated) != 1 {
		t.Fatalf("stats %+v; want one error once states are folded:\n%s", st, &out)
	}
}
