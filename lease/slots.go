package lease

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

var _ sluice.SlotStore = (*Store)(nil)

// Concurrency policies are not leased: a slot is held by one request at a
// time, so there is no batch of them for a node to take ahead. Every
// acquisition and release goes to the remote store, which holds the slots for
// all nodes, and its answers pass through.

// AcquireSlot implements sluice.SlotStore on the remote store.
func (s *Store) AcquireSlot(ctx context.Context, req sluice.Request) (sluice.Result, string, error) {
	remote, err := s.slotStore()
	if err != nil {
		return sluice.Result{}, "", err
	}
	s.remoteDecisions.Add(1)
	s.storeCalls.Add(1)
	return remote.AcquireSlot(ctx, req)
}

// ReleaseSlot implements sluice.SlotStore on the remote store.
func (s *Store) ReleaseSlot(ctx context.Context, p *sluice.Policy, key, token string) (bool, error) {
	remote, err := s.slotStore()
	if err != nil {
		return false, err
	}
	s.storeCalls.Add(1)
	return remote.ReleaseSlot(ctx, p, key, token)
}

func (s *Store) slotStore() (sluice.SlotStore, error) {
	remote, ok := s.remote.(sluice.SlotStore)
	if !ok {
		return nil, fmt.Errorf("lease: the remote store (%T) holds no slots: it does not implement sluice.SlotStore", s.remote)
	}
	return remote, nil
}
