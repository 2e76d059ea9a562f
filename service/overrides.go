package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/overrides"
)

// WithOverrides makes the Service apply the overrides of ov: a check on a
// policy that has one for its key is decided under the override's limit,
// on the policy's own state.
func WithOverrides(ov *overrides.Store) Option { return func(o *options) { o.overrides = ov } }

// Overrides returns the override store, or nil when there is none.
func (s *Service) Overrides() *overrides.Store { return s.overrides }

// applyOverrides returns checks with each policy that has an override for
// the check's key replaced by a copy under the override's limit; checks
// itself when none applies, which costs one map lookup per check.
func (s *Service) applyOverrides(checks []Check) []Check {
	if s.overrides == nil {
		return checks
	}
	set := s.overrides.Snapshot()
	if set.Len() == 0 {
		return checks
	}
	var out []Check
	var now time.Time
	for i, c := range checks {
		if c.Policy == nil || c.Policy.DeniesAll() || !set.Has(c.Policy.Name) {
			continue
		}
		if now.IsZero() {
			now = s.overrides.Now()
		}
		o := set.Lookup(c.Policy.Name, c.Key, now)
		if o == nil {
			continue
		}
		p := *c.Policy
		p.Policy = o.Apply(p.Policy)
		if p.Validate() != nil {
			continue // the policy changed algorithm since: its own limit applies
		}
		if out == nil {
			out = append([]Check(nil), checks...)
		}
		out[i].Policy = &p
	}
	if out == nil {
		return checks
	}
	return out
}

// OpenOverrides returns the override store for the store section cfg: in
// Redis, shared by every node, when the store is Redis; in memory otherwise.
// It loads the overrides before returning (for up to loadWait, so a node
// that restarts enforces them from its first decision) and keeps them
// current until ctx ends; close releases its connection.
func OpenOverrides(ctx context.Context, cfg config.Store, log *slog.Logger, opts ...overrides.Option) (ov *overrides.Store, closeFn func(), err error) {
	opts = append([]overrides.Option{overrides.WithLogger(log)}, opts...)
	rc, problems := readStore(cfg)
	if len(problems) > 0 {
		return nil, nil, problems[0]
	}
	if rc == nil {
		return overrides.NewMemory(opts...), func() {}, nil
	}
	opt, err := rueidis.ParseURL(cfg.URL)
	if err != nil {
		return nil, nil, err
	}
	if rc.password != "" {
		opt.Password = rc.password
	}
	if rc.tls != nil {
		opt.TLSConfig = rc.tls
	}
	ov = overrides.NewRedis(opt, opts...)
	loadCtx, cancel := context.WithTimeout(ctx, loadWait)
	defer cancel()
	if err := ov.Reload(loadCtx); err != nil {
		log.Warn("cannot read the overrides yet; retrying in the background", "error", redact(err, cfg.URL))
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); ov.Run(runCtx) }()
	return ov, func() { stop(); <-done; ov.Close() }, nil
}

// loadWait bounds the first read of the overrides at start.
const loadWait = 2 * time.Second
