package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/overrides"
)

// WithOverrides makes the Service apply the overrides of ov: a check on a
// policy that has one for its key is decided under the override's limit,
// on the policy's own state.
func WithOverrides(ov *overrides.Store) Option { return func(o *options) { o.overrides = ov } }

// Overrides returns the override store, or nil when there is none.
func (s *Service) Overrides() *overrides.Store { return s.overrides }

// Resolve sets each check's Limit to the policy it is decided under: its
// override's (of its key or a prefix of it), else its plan's, else its
// policy's own. Decide then decides under exactly those limits, so a front
// end that reports them (current_limit, RateLimit-Policy) reports what was
// applied even when an override changes meanwhile.
func (s *Service) Resolve(checks []Check) {
	set, now := s.overrideSet(), time.Time{}
	for i := range checks {
		c := &checks[i]
		if c.Limit = c.Policy; c.Policy == nil {
			continue
		}
		if l := s.limitOf(*c, set, &now); l != nil {
			c.Limit = l
		}
	}
}

// overrideSet returns the overrides in force, nil without an override store.
func (s *Service) overrideSet() *overrides.Set {
	if s.overrides == nil {
		return nil
	}
	return s.overrides.Snapshot()
}

// applyOverrides returns checks with each Policy replaced by the one the
// check is decided under (Limit when resolved, else see Resolve); checks
// itself when none differs, which costs one map lookup per check.
func (s *Service) applyOverrides(checks []Check) []Check {
	var set *overrides.Set
	var now time.Time
	resolved := false
	var out []Check
	for i, c := range checks {
		limit := c.Limit
		if limit == nil {
			if !resolved {
				set, resolved = s.overrideSet(), true
			}
			limit = s.limitOf(c, set, &now)
		}
		if limit == nil || limit == c.Policy {
			continue
		}
		if out == nil {
			out = append([]Check(nil), checks...)
		}
		out[i].Policy = limit
	}
	if out == nil {
		return checks
	}
	return out
}

// limitOf returns a copy of c's policy under the limit of c's override, else
// of its plan; nil when neither applies. *now is read from the override
// store once, when first needed.
func (s *Service) limitOf(c Check, set *overrides.Set, now *time.Time) *config.Policy {
	if c.Policy == nil || c.Policy.DeniesAll() {
		return nil
	}
	var limit *sluice.Policy
	if set.Has(c.Policy.Name) {
		if now.IsZero() {
			*now = s.overrides.Now()
		}
		if o := set.Lookup(c.Policy.Name, c.Key, *now); o != nil {
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
		return nil
	}
	p := *c.Policy
	p.Policy = *limit
	return &p
}

// OpenOverrides returns the override store for the store section cfg: in
// Redis, shared by every node, when the store is Redis; in memory otherwise.
// It reads Redis' overrides before returning (for up to loadWait, so a node
// that restarts enforces them from its first decision) and keeps them
// current until ctx ends; closeFn stops that and releases the connection.
func OpenOverrides(ctx context.Context, cfg config.Store, log *slog.Logger, opts ...overrides.Option) (ov *overrides.Store, closeFn func(), err error) {
	opts = append([]overrides.Option{overrides.WithLogger(log), overrides.WithKeyPrefix(cfg.KeyPrefix)}, opts...)
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
