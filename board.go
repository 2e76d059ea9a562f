package sluice

import (
	"context"
	"time"
)

// Demand is one member's value on a demand board.
type Demand struct {
	// Member names who posted the value: for fair share, a tenant on one
	// node; for any other user, an id of its own.
	Member string
	// Value is what the member posted, in the board user's unit (for fair
	// share, requests per policy period).
	Value float64
}

// DemandBoard is implemented by stores that keep demand boards: named sets
// of members' values, each live for a TTL after it was last posted, that
// every process sharing the store reads. Fair share uses one board per
// policy to learn every node's tenants' recent demand; anything else that
// divides a capacity across processes can use boards of its own. A board is
// read and written at an interval, never per decision: a post writes its
// entries, a read returns every live one.
type DemandBoard interface {
	// PostDemand sets each entry's value on board, replacing the member's
	// previous one, live until ttl (> 0) has passed on the store's clock.
	// A later post of the member renews it. Entries name distinct members.
	PostDemand(ctx context.Context, board string, entries []Demand, ttl time.Duration) error
	// ReadDemand returns the board's live entries, one per member, in no
	// particular order; an unknown board has none. Expired entries are
	// never returned, and the store forgets them.
	ReadDemand(ctx context.Context, board string) ([]Demand, error)
}
