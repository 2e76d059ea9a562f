package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/overrides"
)

// WithOverrides makes the Service apply the overrides of ov: a check on a
// policy that has one for its key is decided under the override's limit,
// on the policy's own state.
func WithOverrides(ov *overrides.Store) Option { return func(o *options) { o.overrides = ov } }

// Overrides returns the override store, or nil when there is none.
func (s *Service) Overrides() *overrides.Store { return s.overrides }

// Effective returns the limit c is decided under: its override's, else its
// plan's, else its policy's own. Front ends advertise it (RateLimit-Policy);
// an override changed between Decide and Effective shows the newer limit.
func (s *Service) Effective(c Check) *sluice.Policy {
	return &s.applyOverrides([]Check{c})[0].Policy.Policy
}

// applyOverrides returns checks with each policy whose limit differs for the
// check — an override of its key or a prefix of it, else its plan — replaced
// by a copy under that limit; checks itself when none does, which costs one
// map lookup per check.
func (s *Service) applyOverrides(checks []Check) []Check {
	var set *overrides.Set
	if s.overrides != nil {
		set = s.overrides.Snapshot()
	}
	var out []Check
	var now time.Time
	for i, c := range checks {
		if c.Policy == nil || c.Policy.DeniesAll() {
			continue
		}
		var limit *sluice.Policy
		if set.Has(c.Policy.Name) {
			if now.IsZero() {
				now = s.overrides.Now()
			}
			if o := set.Lookup(c.Policy.Name, c.Key, now); o != nil {
				sp := o.Apply(c.Policy.Policy)
				if sp.Validate() == nil { // else the policy changed algorithm since: the override is moot
					limit = &sp
				}
			}
		}
		if limit == nil && c.Policy.Plans != nil {
			sp := c.Policy.ForPlan(c.Plan)
			limit = &sp
		}
		if limit == nil {
			continue
		}
		if out == nil {
			out = append([]Check(nil), checks...)
		}
		p := *c.Policy
		p.Policy = *limit
		out[i].Policy = &p
	}
	if out == nil {
		return checks
	}
	return out
}

// OpenOverrides returns the override store for the store section cfg: in
// Redis, shared by every node, when the store is Redis; in memory otherwise.
// It reads Redis' overrides before returning (for up to loadWait, so a node
// that restarts enforces them from its first decision) and keeps them
// current until ctx ends; closeFn stops that and releases the connection.
func OpenOverrides(ctx context.Context, cfg config.Store, log *slog.Logger, opts ...overrides.Option) (ov *overrides.Store, closeFn func(), err error) {
	opts = append([]overrides.Option{overrides.WithLogger(log)}, opts...)
	rc, problems := readStore(cfg)
	if len(problems) > 0 {
		return nil, nil, problems[0]
	}
	if rc == nil {
		ov = overrides.NewMemory(opts...)
	} else {
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
