package memory

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// boards holds the store's demand boards (sluice.DemandBoard). They are
// read and written at an interval, not per decision, so one lock will do.
type boards struct {
	mu sync.Mutex
	m  map[string]map[string]boardEntry
}

type boardEntry struct {
	value   float64
	expires int64 // store clock, µs: live while now < expires
}

var errBoardTTL = errors.New("memory: PostDemand needs a TTL above 0")

// PostDemand implements sluice.DemandBoard.
func (s *Store) PostDemand(_ context.Context, board string, entries []sluice.Demand, ttl time.Duration) error {
	if ttl <= 0 {
		return errBoardTTL
	}
	if len(entries) == 0 {
		return nil
	}
	expires := s.now() + int64(ttl/time.Microsecond)
	b := &s.boards
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]map[string]boardEntry{}
	}
	members := b.m[board]
	if members == nil {
		members = make(map[string]boardEntry, len(entries))
		b.m[board] = members
	}
	for _, d := range entries {
		members[d.Member] = boardEntry{value: d.Value, expires: expires}
	}
	return nil
}

// ReadDemand implements sluice.DemandBoard.
func (s *Store) ReadDemand(_ context.Context, board string) ([]sluice.Demand, error) {
	now := s.now()
	b := &s.boards
	b.mu.Lock()
	defer b.mu.Unlock()
	members := b.m[board]
	out := make([]sluice.Demand, 0, len(members))
	for m, e := range members {
		if now >= e.expires {
			delete(members, m)
			continue
		}
		out = append(out, sluice.Demand{Member: m, Value: e.value})
	}
	if len(members) == 0 {
		delete(b.m, board)
	}
	return out, nil
}
