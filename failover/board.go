package failover

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice"
)

var errNoBoard = errors.New("failover: the primary store keeps no demand boards")

// PostDemand implements sluice.DemandBoard on the primary, within the
// store's timeout. The fail policy does not apply: a board is written at an
// interval, not per decision, and its user (fair share) keeps what it last
// read while the primary fails; the decisions it shapes go through the fail
// policy as any other.
func (s *Store) PostDemand(ctx context.Context, board string, entries []sluice.Demand, ttl time.Duration) error {
	b, ok := s.primary.(sluice.DemandBoard)
	if !ok {
		return errNoBoard
	}
	cctx, cancel, ok := s.timeouts.bound(ctx)
	if !ok {
		return &timeoutError{err: errBudgetSpent}
	}
	defer cancel()
	return b.PostDemand(cctx, board, entries, ttl)
}

// ReadDemand implements sluice.DemandBoard on the primary, as PostDemand.
func (s *Store) ReadDemand(ctx context.Context, board string) ([]sluice.Demand, error) {
	b, ok := s.primary.(sluice.DemandBoard)
	if !ok {
		return nil, errNoBoard
	}
	cctx, cancel, ok := s.timeouts.bound(ctx)
	if !ok {
		return nil, &timeoutError{err: errBudgetSpent}
	}
	defer cancel()
	return b.ReadDemand(cctx, board)
}
