package failover

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// ReadyFresh is how long a failed call keeps Ready false when no call has
// succeeded since.
const ReadyFresh = 5 * time.Second

// health remembers the outcome of the last calls to the primary.
type health struct {
	lastOK   atomic.Int64 // unix ns of the last answered call
	lastFail atomic.Int64 // unix ns of the last failed call
	lastErr  atomic.Pointer[error]
}

func (h *health) record(now time.Time, err error) {
	if err == nil {
		h.lastOK.Store(now.UnixNano())
		return
	}
	h.lastErr.Store(&err)
	h.lastFail.Store(now.UnixNano())
}

func (h *health) cause() error {
	if e := h.lastErr.Load(); e != nil {
		return *e
	}
	return ErrBreakerOpen
}

// Ready reports whether decisions are being made by the primary, nil if they
// are. Not while the breaker is open or probing, nor while the last real call
// failed (within ReadyFresh); otherwise it decides a probe through the
// breaker — a real decision of cost 1 on key under p, which writes to the
// primary as every decision does, so a store that answers reads but refuses
// writes (Redis at maxmemory under noeviction) is not ready, and an idle
// node learns at once that its store went away. The probe counts as a call:
// on an idle node, readiness checks are what probe a half_open breaker.
// p should admit every call (a large limit) on a key no client uses.
func (s *Store) Ready(ctx context.Context, p *sluice.Policy, key string) error {
	if s.State() == BreakerClosed {
		ok, fail := s.health.lastOK.Load(), s.health.lastFail.Load()
		if fail > ok && s.clock.Now().UnixNano()-fail < int64(ReadyFresh) {
			return fmt.Errorf("the last store call failed: %w", s.health.cause())
		}
	}
	probe := sluice.Request{Policy: p, Key: key, Cost: 1}
	err := s.call(ctx, s.breakersOf([]sluice.Request{probe}), func(cctx context.Context) error {
		_, err := s.primary.Decide(cctx, probe)
		return err
	})
	switch {
	case errors.Is(err, ErrBreakerOpen):
		return fmt.Errorf("circuit breaker %v after: %w", s.State(), s.health.cause())
	case err != nil:
		return err
	case s.State() != BreakerClosed:
		return fmt.Errorf("circuit breaker %v: probing the store", s.State())
	}
	return nil
}
