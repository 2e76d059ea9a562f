package failover

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

var _ sluice.Charger = (*Store)(nil)

// Charge implements sluice.Charger: one call to the primary under the
// breakers and the timeout, as Decide makes. A charge the primary recorded
// and that left the key owing is remembered under FailLocal, like a denial:
// the key stays denied until its RetryAfter if the primary goes away.
//
// When the primary fails, the fail policy applies to the charge. FailLocal
// records it on the local store, under the divided policy, Degraded.
// FailOpen has nothing to record it on: the usage is dropped, and the
// Result, Degraded, is openResult's, as if the charge fitted a fresh key.
// FailClosed returns its *UnavailableError: the charge was not recorded, and
// the caller knows it. A primary that cannot charge gets no call:
// sluice.ErrNotChargeable.
func (s *Store) Charge(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	c, err := s.primaryCharger()
	if err != nil {
		return sluice.Result{}, err
	}
	var r sluice.Result
	err = s.call(ctx, s.breakersOf([]sluice.Request{req}), func(cctx context.Context) (err error) {
		r, err = c.Charge(cctx, req)
		return err
	})
	if err == nil && s.mode == FailLocal && !r.Allowed {
		s.memo.note(req, r, s.clock.Now())
	}
	if err == nil || !isStoreFailure(ctx, err) {
		return r, err
	}
	var results [1]sluice.Result
	err = s.chargeDegraded(ctx, []sluice.Request{req}, results[:], err)
	return results[0], err
}

// ChargeAll implements sluice.Charger: one call to the primary under the
// breakers and the timeout. When it fails, the fail policy applies to every
// charge of the set, as Charge's does; the primary may have recorded some
// of them before it failed (a set spread over Redis nodes), which FailLocal
// then counts twice: never fewer.
func (s *Store) ChargeAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	c, err := s.primaryCharger()
	if err != nil {
		return err
	}
	err = s.call(ctx, s.breakersOf(reqs), func(cctx context.Context) error {
		return c.ChargeAll(cctx, reqs, results)
	})
	if err == nil && s.mode == FailLocal {
		now := s.clock.Now()
		for i, r := range reqs {
			if !results[i].Allowed {
				s.memo.note(r, results[i], now)
			}
		}
	}
	if err == nil || !isStoreFailure(ctx, err) {
		return err
	}
	return s.chargeDegraded(ctx, reqs, results, err)
}

func (s *Store) primaryCharger() (sluice.Charger, error) {
	c, ok := s.primary.(sluice.Charger)
	if !ok {
		return nil, fmt.Errorf("failover: the primary store cannot charge: %w", sluice.ErrNotChargeable)
	}
	return c, nil
}

// chargeDegraded applies the fail policy to charges the primary could not
// record.
func (s *Store) chargeDegraded(ctx context.Context, reqs []sluice.Request, results []sluice.Result, cause error) error {
	switch s.mode {
	case FailClosed:
		return s.unavailable(cause)
	case FailOpen:
		for i, r := range reqs {
			results[i] = openResult(r)
		}
		return nil
	}
	c, ok := s.local.(sluice.Charger)
	if !ok {
		return s.unavailable(fmt.Errorf("failover: the local store cannot charge: %w", sluice.ErrNotChargeable))
	}
	local := make([]sluice.Request, len(reqs))
	for i, r := range reqs {
		local[i] = sluice.Request{Policy: s.localPolicy(r.Policy), Key: r.Key, Cost: r.Cost}
	}
	if err := c.ChargeAll(ctx, local, results); err != nil {
		return s.localError(err)
	}
	for i := range results {
		results[i].Degraded = true
	}
	return nil
}
