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

// pressure rate-limits the pressure log: a warning at most once a minute, and
// an error at most once a minute, as soon as states are folded.
type pressure struct {
	log        *slog.Logger
	pending    atomic.Bool  // a key went to the compact part since the last log
	lastWarn   atomic.Int64 // when the last warning was written, µs; 0: never
	lastError  atomic.Int64 // the same for the last error
	lastFolded atomic.Uint64
}

// note records that a key went to the compact part.
func (pr *pressure) note() {
	if pr.log != nil && !pr.pending.Load() {
		pr.pending.Store(true)
	}
}

// report logs the pressure noted, unless it logged as much less than a minute
// ago. It runs after a decision on a key the exact part did not hold,
// outside every lock.
func (pr *pressure) report(s *Store, now int64) {
	if pr.log == nil || !pr.pending.Load() {
		return
	}
	folded, last := s.folded.Load() > pr.lastFolded.Load(), &pr.lastWarn
	if folded {
		last = &pr.lastError
	}
	if at := last.Load(); at != 0 && now-at < pressureLogEvery || !last.CompareAndSwap(at, now) {
		return
	}
	pr.pending.Store(false)
	st := s.Stats()
	attrs := []any{"keys", st.Keys, "max_keys", st.MaxKeys, "bytes", st.Bytes, "max_bytes", st.MaxBytes,
		"compact_keys", st.ColdKeys, "compact_slots", st.ColdSlots, "spilled", st.Spilled, "folded", st.Folded}
	if folded {
		pr.lastFolded.Store(st.Folded)
		pr.log.Error("memory store saturated: its compact part is full, some keys are over-counted and may be denied; raise store.max_bytes", attrs...)
		return
	}
	pr.log.Warn("memory store full: new keys are kept in its compact part; size store.max_keys and store.max_bytes above the active keys", attrs...)
}
