package lease

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice"
)

var errNoBoard = errors.New("lease: the remote store keeps no demand boards")

// PostDemand implements sluice.DemandBoard on the remote store: boards are
// shared between nodes, so nothing of them is leased.
func (s *Store) PostDemand(ctx context.Context, board string, entries []sluice.Demand, ttl time.Duration) error {
	b, ok := s.remote.(sluice.DemandBoard)
	if !ok {
		return errNoBoard
	}
	return b.PostDemand(ctx, board, entries, ttl)
}

// ReadDemand implements sluice.DemandBoard on the remote store.
func (s *Store) ReadDemand(ctx context.Context, board string) ([]sluice.Demand, error) {
	b, ok := s.remote.(sluice.DemandBoard)
	if !ok {
		return nil, errNoBoard
	}
	return b.ReadDemand(ctx, board)
}
