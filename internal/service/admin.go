package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
)

// ErrResetUnsupported: the store cannot forget a key.
var ErrResetUnsupported = errors.New("the store does not support resetting a key")

// Reset forgets the state of (p, key) in the store, as if the key had never
// been used.
func (s *Service) Reset(ctx context.Context, p *config.Policy, key string) error {
	r := s.stack.Resetter
	if r == nil {
		return ErrResetUnsupported
	}
	if err := sluice.CheckRequest(sluice.Request{Policy: &p.Policy, Key: key}); err != nil {
		return &engine.CheckError{Policy: p.Name, Err: err}
	}
	if err := r.Reset(ctx, &p.Policy, key); err != nil {
		if ctx.Err() == nil {
			s.obs.StoreFailed(err, s.stack.FailMode())
		}
		return fmt.Errorf("%w: %w", engine.ErrStore, err)
	}
	s.log.Info("key reset", "policy", p.Name)
	return nil
}

// probePolicy is what Ready decides on when the store has been idle: a real
// decision, which writes, under a limit no probe reaches, on a policy name
// configurations cannot use.
var probePolicy = sluice.Policy{Name: "sluice.readyz", Algorithm: sluice.FixedWindow, Limit: 1 << 30, Period: time.Second}

// probeHourly is the second probe of a store with a Redis for per-second
// limits (config.Store.PerSecondURL): probePolicy is decided on that one,
// this one on the other.
var probeHourly = sluice.Policy{Name: "sluice.readyz", Algorithm: sluice.FixedWindow, Limit: 1 << 30, Period: time.Hour}

// StoreStatus is what /readyz and /readyz/store report about the store.
type StoreStatus struct {
	// Ready: decisions are being made by the store.
	Ready bool `json:"ready"`
	// Error is why they are not.
	Error string `json:"error,omitempty"`
	// Breaker is the circuit breaker's state (closed, open, half_open), and
	// OnError the fail policy; both empty for a store without a fail policy
	// (memory).
	Breaker string `json:"breaker,omitempty"`
	OnError string `json:"on_error,omitempty"`
}

// Answering reports whether checks get an answer: decided by the store, or,
// while it cannot decide, by its fail policy (OnError). Only a store without
// a fail policy — a stack of a store as it is (storestack.Of), not opened
// by storestack.Open —
// leaves checks unanswered (503) when it fails.
func (st StoreStatus) Answering() bool { return st.Ready || st.OnError != "" }

// Ready reports whether decisions are being made by the store, not by the
// fail policy. With Redis it goes by the real calls of the last seconds (the
// breaker closed, the last call answered) and, on an idle node, decides a
// probe key — a write, as every decision is: a Redis that answers reads but
// refuses writes (maxmemory under noeviction) is not ready. A service
// whose store is not ready still answers every request by its fail policy,
// without the shared limits: /readyz/store reports it, /readyz does not
// turn unready for it.
func (s *Service) Ready(ctx context.Context) StoreStatus {
	var st StoreStatus
	var err error
	if fs := s.stack.Failover; fs != nil {
		err = fs.Ready(ctx, &probePolicy, "probe")
		if rs := s.stack.Redis; rs != nil && rs.Routes() > 1 && err == nil {
			err = fs.Ready(ctx, &probeHourly, "probe")
		}
		st.Breaker, st.OnError = fs.State().String(), fs.Mode().String()
	} else {
		_, err = s.stack.Store.Decide(ctx, sluice.Request{Policy: &probePolicy, Key: "probe"})
	}
	if err != nil {
		st.Error = fmt.Errorf("%w: %w", engine.ErrStore, err).Error()
		return st
	}
	st.Ready = true
	return st
}
