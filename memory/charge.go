package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
)

var _ sluice.Charger = (*Store)(nil)

// ErrNoRoom is wrapped by the error of a charge the store could not record:
// the key is new (or its log must grow), the store is at its bounds, and
// nothing it holds is safe to drop (see the package doc). The usage is not
// counted; the refusal is counted in Stats().Refused. A decision in the same
// place is denied instead, which needs no error.
var ErrNoRoom = errors.New("memory: no room to record the charge")

// Charge implements sluice.Charger: the charge is applied under the key's
// shard lock, like a decision, and recorded even beyond the limit.
func (s *Store) Charge(_ context.Context, req sluice.Request) (res sluice.Result, err error) {
	o := op{kind: opCharge, req: req}
	if !s.apply(req.Policy, req.Key, req.Cost, req.Cost > 0, &o, &res) {
		return sluice.Result{}, fmt.Errorf("%w: policy %q, %d units", ErrNoRoom, req.Policy.Name, req.Cost)
	}
	return res, nil
}

// ChargeAll implements sluice.Charger: each request as Charge, in order. It
// stops at the first that finds no room.
func (s *Store) ChargeAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	for i, r := range reqs {
		res, err := s.Charge(ctx, r)
		if err != nil {
			return err
		}
		results[i] = res
	}
	return nil
}

// nextLogCap is the capacity of the log buffer after o (or a decision, when
// o is nil) left next: see the function nextLogCap. A charge may grow the
// log, or merge into its newest entry in a copy of the same size, whatever
// its Result, so its capacity is read off the buffer itself.
func (o *op) nextLogCap(alg uint8, c logCapacity, oldLen int, next *sluice.State, admitted bool) logCapacity {
	if o != nil && o.kind == opCharge {
		if alg != slidingLogIndex || next.Log.Len() == 0 {
			return 0
		}
		return logCapacity(next.Log.Cap())
	}
	return nextLogCap(alg, c, oldLen, next, admitted)
}
