package failover

import (
	"context"

	"github.com/sluicehq/sluice"
)

// degraded applies the fail policy to one request.
func (s *Store) degraded(ctx context.Context, req sluice.Request, cause error) (sluice.Result, error) {
	switch s.mode {
	case FailClosed:
		return sluice.Result{}, s.unavailable(cause)
	case FailOpen:
		return openResult(req), nil
	default:
		return s.decideLocal(ctx, req)
	}
}

// degradedAll applies the fail policy to a batch, all or nothing.
func (s *Store) degradedAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result, cause error) error {
	switch s.mode {
	case FailClosed:
		return s.unavailable(cause)
	case FailOpen:
		for i, r := range reqs {
			results[i] = openResult(r)
		}
		return nil
	default:
		return s.decideAllLocal(ctx, reqs, results)
	}
}

func (s *Store) unavailable(cause error) error {
	return &UnavailableError{Cause: cause, RetryAfter: s.retryIn(s.clock.Now())}
}

// localError passes a caller's mistake through, and makes any other error of
// the local store a denial.
func (s *Store) localError(err error) error {
	if callerError(err) {
		return err
	}
	return s.unavailable(err)
}

// openResult admits req as if its key were fresh: the state is unknown, and
// a fresh key is what the client would most likely meet.
func openResult(req sluice.Request) sluice.Result {
	return sluice.Result{Allowed: true, Limit: req.Policy.Limit, Remaining: max(0, req.Policy.Capacity()-req.Cost), Degraded: true}
}

func (s *Store) decideLocal(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	lp := s.localPolicy(req.Policy)
	if req.Cost > lp.Capacity() {
		return overLocalCapacity(lp), nil
	}
	if wait := s.memo.retryIn(req, s.clock.Now()); wait > 0 {
		return sluice.Result{Limit: lp.Limit, RetryAfter: wait, Degraded: true}, nil
	}
	req.Policy = lp
	r, err := s.local.Decide(ctx, req)
	if err != nil {
		// The local store failed too (it never should): deny rather than
		// let the request through uncounted.
		return sluice.Result{}, s.localError(err)
	}
	r.Degraded = true
	return r, nil
}

func (s *Store) decideAllLocal(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	local := make([]sluice.Request, len(reqs))
	now := s.clock.Now()
	for i, r := range reqs {
		lp := s.localPolicy(r.Policy)
		if r.Cost > lp.Capacity() {
			// The divided limit can never admit this cost: deny the batch.
			for j, r := range reqs {
				results[j] = overLocalCapacity(s.localPolicy(r.Policy))
			}
			return nil
		}
		if wait := s.memo.retryIn(r, now); wait > 0 {
			// The primary denied this key: the batch is denied until then.
			for j, r := range reqs {
				results[j] = sluice.Result{Limit: s.localPolicy(r.Policy).Limit, RetryAfter: wait, Degraded: true}
			}
			return nil
		}
		local[i] = sluice.Request{Policy: lp, Key: r.Key, Cost: r.Cost}
	}
	if err := s.local.DecideAll(ctx, local, results); err != nil {
		return s.localError(err)
	}
	for i := range results {
		results[i].Degraded = true
	}
	return nil
}

// overLocalCapacity denies a cost the divided policy can never admit: there
// is no wait after which it would pass, so RetryAfter is a period, the
// soonest the primary might be back to decide it.
func overLocalCapacity(lp *sluice.Policy) sluice.Result {
	return sluice.Result{Limit: lp.Limit, RetryAfter: lp.Period, Degraded: true}
}

// maxDivided bounds the cache of divided policies; policies are replaced on
// every config reload, so old ones are dropped wholesale.
const maxDivided = 4096

// localPolicy returns p with its limit and burst divided by the node count.
func (s *Store) localPolicy(p *sluice.Policy) *sluice.Policy {
	if s.nodes <= 1 {
		return p
	}
	s.mu.RLock()
	lp, ok := s.divided[p]
	s.mu.RUnlock()
	if ok {
		return lp
	}
	d := *p
	d.Limit = max(1, p.Limit/s.nodes)
	if p.Burst > 0 {
		d.Burst = max(1, p.Burst/s.nodes)
	}
	lp = &d
	if lp.Validate() != nil {
		lp = p // cannot happen for a valid p: smaller limits stay valid
	}
	s.mu.Lock()
	if s.divided == nil || len(s.divided) >= maxDivided {
		s.divided = make(map[*sluice.Policy]*sluice.Policy)
	}
	s.divided[p] = lp
	s.mu.Unlock()
	return lp
}
