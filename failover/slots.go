package failover

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice"
)

var _ sluice.SlotStore = (*Store)(nil)

// The fail policy for in-flight slots. A slot's token says where it was
// acquired, so that its release goes there whatever the primary's health is
// by then: the primary's tokens pass through as they are, the local store's
// start with localToken, and the tokens of slots FailOpen admitted without
// holding anything start with openToken. The stores' own tokens never hold a
// ':' (sluice.NewSlotToken is hex), so the three cannot be confused.
const (
	localToken = "local:"
	openToken  = "open:"
)

// AcquireSlot implements sluice.SlotStore: on the primary while it answers,
// else as the fail policy says. FailClosed denies with an
// *UnavailableError; FailOpen admits without holding a slot anywhere (its
// token releases nothing); FailLocal acquires on the local store, its limit
// divided by WithNodes like every other. A denial by the primary is not
// remembered for the local store as a rate denial is: a release can end it
// at any moment.
func (s *Store) AcquireSlot(ctx context.Context, req sluice.Request) (sluice.Result, string, error) {
	primary, ok := s.primary.(sluice.SlotStore)
	if !ok {
		return sluice.Result{}, "", noSlots("primary", s.primary)
	}
	var r sluice.Result
	var token string
	err := s.call(ctx, s.breakersOf([]sluice.Request{req}), func(cctx context.Context) (err error) {
		r, token, err = primary.AcquireSlot(cctx, req)
		return err
	})
	if err == nil || !isStoreFailure(ctx, err) {
		return r, token, err
	}
	switch s.mode {
	case FailClosed:
		return sluice.Result{}, "", s.unavailable(err)
	case FailOpen:
		if req.Cost == 0 {
			return openResult(req), "", nil
		}
		return openResult(req), openToken + sluice.NewSlotToken(), nil
	}
	local, ok := s.local.(sluice.SlotStore)
	if !ok {
		return sluice.Result{}, "", s.unavailable(noSlots("local", s.local))
	}
	req.Policy = s.localPolicy(req.Policy)
	r, token, err = local.AcquireSlot(ctx, req)
	if err != nil {
		return sluice.Result{}, "", s.localError(err)
	}
	r.Degraded = true
	if token != "" {
		token = localToken + token
	}
	return r, token, nil
}

// ReleaseSlot implements sluice.SlotStore: a slot acquired on the local store
// is released there, one FailOpen admitted releases nothing (false), and
// one of the primary's on the primary, under the breaker and the timeout
// like any call. A release the primary cannot make fails with its error
// (no fail policy applies: there is nothing to decide), and the slot
// returns when its lease ends.
func (s *Store) ReleaseSlot(ctx context.Context, p *sluice.Policy, key, token string) (bool, error) {
	if rest, ok := strings.CutPrefix(token, localToken); ok {
		local, ok := s.local.(sluice.SlotStore)
		if !ok {
			return false, nil // no local store: it cannot have been acquired there
		}
		return local.ReleaseSlot(ctx, s.localPolicy(p), key, rest)
	}
	if strings.HasPrefix(token, openToken) {
		return false, nil
	}
	primary, ok := s.primary.(sluice.SlotStore)
	if !ok {
		return false, noSlots("primary", s.primary)
	}
	var released bool
	req := sluice.Request{Policy: p, Key: key}
	err := s.call(ctx, s.breakersOf([]sluice.Request{req}), func(cctx context.Context) (err error) {
		released, err = primary.ReleaseSlot(cctx, p, key, token)
		return err
	})
	return released, err
}

func noSlots(which string, store sluice.Store) error {
	return fmt.Errorf("failover: the %s store (%T) holds no slots: it does not implement sluice.SlotStore", which, store)
}
