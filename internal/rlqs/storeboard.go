package rlqs

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// StoreBoard is a Board on a store's demand boards (sluice.DemandBoard): on
// Redis or a Redis Cluster, every Sluice node sharing the store divides a
// bucket's limit among all the Envoys reporting on it, whichever node their
// streams reach. Each bucket is one board, named "rlqs:" and the bucket.
type StoreBoard struct {
	boards sluice.DemandBoard
}

var _ Board = (*StoreBoard)(nil)

// NewStoreBoard returns a Board on boards.
func NewStoreBoard(boards sluice.DemandBoard) *StoreBoard { return &StoreBoard{boards: boards} }

// A board has no removal: a leaving member's entry is replaced by a
// tombstone, a negative demand no report makes (demands are rates, never
// below 0), which every read leaves out and which expires after leaveTTL.
const (
	tombstone = -1
	leaveTTL  = time.Minute
)

// Report implements Board.
func (b *StoreBoard) Report(ctx context.Context, bucket, member string, demand float64, ttl time.Duration) ([]Member, error) {
	if err := b.boards.PostDemand(ctx, boardName(bucket), []sluice.Demand{{Member: member, Value: demand}}, ttl); err != nil {
		return nil, err
	}
	return b.read(ctx, bucket)
}

// Leave implements Board, with a tombstone.
func (b *StoreBoard) Leave(ctx context.Context, bucket, member string) ([]Member, error) {
	if err := b.boards.PostDemand(ctx, boardName(bucket), []sluice.Demand{{Member: member, Value: tombstone}}, leaveTTL); err != nil {
		return nil, err
	}
	return b.read(ctx, bucket)
}

// read returns bucket's live members, tombstones left out, sorted by ID.
func (b *StoreBoard) read(ctx context.Context, bucket string) ([]Member, error) {
	entries, err := b.boards.ReadDemand(ctx, boardName(bucket))
	if err != nil {
		return nil, err
	}
	out := make([]Member, 0, len(entries))
	for _, e := range entries {
		if e.Value >= 0 {
			out = append(out, Member{ID: e.Member, Demand: e.Value})
		}
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func boardName(bucket string) string { return "rlqs:" + bucket }
