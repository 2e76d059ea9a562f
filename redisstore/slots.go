package redisstore

import (
	"context"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

var _ sluice.SlotStore = (*Store)(nil)

// AcquireSlot implements sluice.SlotStore: one call of the acquire script
// (lua/slots.lua) on the sorted set of the key's slots, scored by when each
// was acquired on the store's clock (Redis TIME unless WithClock). A key's
// slots live on one Cluster slot and one shard, like any key's state.
func (s *Store) AcquireSlot(ctx context.Context, req sluice.Request) (sluice.Result, string, error) {
	token := ""
	if req.Cost > 0 {
		token = sluice.NewSlotToken()
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	p := req.Policy
	var reply [4]int64
	args := []string{s.clockArg(), strconv.FormatInt(p.Period.Microseconds(), 10), strconv.FormatInt(p.Limit, 10), token}
	if err := s.run.Run(ctx, scriptAcquire, []string{s.Key(p, req.Key)}, args, reply[:]); err != nil {
		return sluice.Result{}, "", scriptError(scriptAcquire, err)
	}
	res := sluice.Result{
		Allowed:    reply[0] == 1,
		Limit:      p.Limit,
		Remaining:  reply[1],
		RetryAfter: time.Duration(reply[2]) * time.Microsecond,
		ResetAfter: time.Duration(reply[3]) * time.Microsecond,
	}
	if !res.Allowed {
		token = ""
	}
	return res, token, nil
}

// ReleaseSlot implements sluice.SlotStore: one call of the release script.
func (s *Store) ReleaseSlot(ctx context.Context, p *sluice.Policy, key, token string) (bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var reply [1]int64
	args := []string{s.clockArg(), strconv.FormatInt(p.Period.Microseconds(), 10), token}
	if err := s.run.Run(ctx, scriptRelease, []string{s.Key(p, key)}, args, reply[:]); err != nil {
		return false, scriptError(scriptRelease, err)
	}
	return reply[0] == 1, nil
}

// clockArg is the scripts' now argument: "" for Redis TIME, else the client
// clock's µs.
func (s *Store) clockArg() string {
	if s.clock == nil {
		return ""
	}
	return strconv.FormatInt(s.now(), 10)
}
