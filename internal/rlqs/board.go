package rlqs

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// Member is one Envoy stream's demand on a bucket, as a Board holds it.
type Member struct {
	// ID names the stream: unique across every node sharing the Board.
	ID string
	// Demand is the stream's reported demand, in requests per second.
	Demand float64
}

// Board is where the nodes serving one bucket's Envoys meet: each node
// reports each of its streams' demand, and learns every live member's. The
// fair shares are computed from that list alone, so every node computes the
// same ones. A member not reported again within its TTL is gone.
type Board interface {
	// Report records member's demand on bucket for ttl and returns every
	// live member of bucket, member included, sorted by ID.
	Report(ctx context.Context, bucket, member string, demand float64, ttl time.Duration) ([]Member, error)
	// Leave removes member from bucket at once (its stream closed, or the
	// bucket was abandoned) and returns the members left, sorted by ID.
	Leave(ctx context.Context, bucket, member string) ([]Member, error)
}

// MemoryBoard is a Board in this process: the nodes sharing it are the
// Servers given it. It is safe for concurrent use.
type MemoryBoard struct {
	clock   sluice.Clock
	mu      sync.Mutex
	buckets map[string]map[string]boardEntry
}

type boardEntry struct {
	demand  float64
	expires time.Time
}

// NewMemoryBoard returns an empty MemoryBoard timing TTLs by clock (nil:
// sluice.SystemClock()).
func NewMemoryBoard(clock sluice.Clock) *MemoryBoard {
	if clock == nil {
		clock = sluice.SystemClock()
	}
	return &MemoryBoard{clock: clock, buckets: make(map[string]map[string]boardEntry)}
}

// Report implements Board.
func (b *MemoryBoard) Report(_ context.Context, bucket, member string, demand float64, ttl time.Duration) ([]Member, error) {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.buckets[bucket]
	if m == nil {
		m = make(map[string]boardEntry)
		b.buckets[bucket] = m
	}
	m[member] = boardEntry{demand: demand, expires: now.Add(ttl)}
	return b.live(bucket, now), nil
}

// Leave implements Board.
func (b *MemoryBoard) Leave(_ context.Context, bucket, member string) ([]Member, error) {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.buckets[bucket], member)
	return b.live(bucket, now), nil
}

// live drops bucket's expired members and returns the others, sorted; an
// empty bucket is dropped too, so the board holds only live buckets.
func (b *MemoryBoard) live(bucket string, now time.Time) []Member {
	m := b.buckets[bucket]
	out := make([]Member, 0, len(m))
	for id, e := range m {
		if !now.Before(e.expires) {
			delete(m, id)
			continue
		}
		out = append(out, Member{ID: id, Demand: e.demand})
	}
	if len(m) == 0 {
		delete(b.buckets, bucket)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}
