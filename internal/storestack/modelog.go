package storestack

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/redisstore"
)

// modeRetry is how often logMode asks again while Redis cannot be reached.
const modeRetry = time.Second

// startModeLog logs, in the background, how rs runs its Lua on Redis —
// functions (FCALL) or scripts (EVALSHA) — and why, in one line: at start-up
// when Redis answers, else as soon as it first does. Scripts cost Redis more
// CPU per decision, so an operator should see the choice and its cause (an
// ACL, an older Redis, a managed service). stop ends it, for close.
func startModeLog(rs *redisstore.Store, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		logMode(ctx, rs, log)
	}()
	return func() { cancel(); <-done }
}

func logMode(ctx context.Context, rs *redisstore.Store, log *slog.Logger) {
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
		}
		if m, err := rs.Mode(ctx); err == nil {
			log.Info("redis store mode", "mode", string(m), "reason", rs.ModeReason())
			return
		}
		retry.Reset(modeRetry)
	}
}
