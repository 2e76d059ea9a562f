package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/overrides"
	"github.com/sluicehq/sluice/internal/storestack"
)

// WithOverrides makes the Service apply the overrides of ov: a check on a
// policy that has one for its key is decided under the override's limit,
// on the policy's own state.
func WithOverrides(ov *overrides.Store) Option { return func(o *options) { o.overrides = ov } }

// Overrides returns the override store, or nil when there is none.
func (s *Service) Overrides() *overrides.Store { return s.overrides }

// OpenOverrides returns the override store for the store section cfg: in
// Redis, shared by every node, when the store is Redis; in memory otherwise.
// It reads Redis' overrides before returning (for up to loadWait, so a node
// that restarts enforces them from its first decision) and keeps them
// current until ctx ends; closeFn stops that and releases the connection.
func OpenOverrides(ctx context.Context, cfg config.Store, log *slog.Logger, opts ...overrides.Option) (ov *overrides.Store, closeFn func(), err error) {
	opts = append([]overrides.Option{overrides.WithLogger(log), overrides.WithKeyPrefix(cfg.KeyPrefix)}, opts...)
	opt, redis, err := storestack.RedisClient(cfg)
	if err != nil {
		return nil, nil, err
	}
	if !redis {
		ov = overrides.NewMemory(opts...)
	} else {
		ov = overrides.NewRedis(opt, opts...)
		loadCtx, cancel := context.WithTimeout(ctx, loadWait)
		defer cancel()
		if err := ov.Reload(loadCtx); err != nil {
			log.Warn("cannot read the overrides yet; retrying in the background", "error", storestack.Redact(err, cfg.URL))
		}
	}
	// Run keeps a Redis store current, and drops expired overrides from
	// either store's snapshot (and its gauge).
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); ov.Run(runCtx) }()
	return ov, func() { stop(); <-done; ov.Close() }, nil
}

// loadWait bounds the first read of the overrides at start.
const loadWait = 2 * time.Second
