package memory

import (
	"log/slog"
	"sync/atomic"
	"time"
)

// WithLogger makes the store log, at most once a minute, while it is full:
// when new keys go to its compact part because the exact part has no room,
// and (as an error) when the compact part is full too and folds states into
// its floors, over-counting the keys that share them. Default: no log.
func WithLogger(l *slog.Logger) Option { return func(cf *config) { cf.log = l } }

// pressureLogEvery is the least time between two pressure logs.
const pressureLogEvery = int64(time.Minute / time.Microsecond)

// pressure rate-limits the pressure log.
type pressure struct {
	log        *slog.Logger
	pending    atomic.Bool  // a key went to the compact part since the last log
	last       atomic.Int64 // when the last log was written, µs; 0: never
	lastFolded atomic.Uint64
}

// note records that a key went to the compact part.
func (pr *pressure) note() {
	if pr.log != nil && !pr.pending.Load() {
		pr.pending.Store(true)
	}
}

// report logs the pressure noted, unless it logged less than a minute ago.
// It runs after a decision on a key the exact part did not hold, outside
// every lock.
func (pr *pressure) report(s *Store, now int64) {
	if pr.log == nil || !pr.pending.Load() {
		return
	}
	last := pr.last.Load()
	if last != 0 && now-last < pressureLogEvery || !pr.last.CompareAndSwap(last, now) {
		return
	}
	pr.pending.Store(false)
	st := s.Stats()
	attrs := []any{"keys", st.Keys, "max_keys", st.MaxKeys, "bytes", st.Bytes, "max_bytes", st.MaxBytes,
		"compact_keys", st.ColdKeys, "compact_slots", st.ColdSlots, "spilled", st.Spilled, "folded", st.Folded}
	if folded := pr.lastFolded.Swap(st.Folded); st.Folded > folded {
		pr.log.Error("memory store saturated: its compact part is full, some keys are over-counted and may be denied; raise store.max_bytes", attrs...)
		return
	}
	pr.log.Warn("memory store full: new keys are kept in its compact part; size store.max_keys and store.max_bytes above the active keys", attrs...)
}
