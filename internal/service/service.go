// Package service is the core of `sluice serve` and `sluice proxy`: it holds
// the configuration in force — the files', merged with a dynamic source's
// (xDS), swapped on reload without touching the counters in the store — and
// the engine (package engine) that decides every front end's requests under
// it on the store stack (package storestack), reporting to one observer
// (package observe). The Envoy rate limit service (envoyrls), the HTTP API
// (httpapi), the reverse proxy and the forward-auth endpoint (proxy) are
// front ends over one Service, so all of them decide exactly alike.
package service

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/observe"
	"github.com/sluicehq/sluice/internal/overrides"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/tracing"
)

// Service decides checks against the configuration in force: its Engine's
// Decide and DecideRequest are the decision path of every front end. It is
// safe for concurrent use.
type Service struct {
	*engine.Engine
	stack   *storestack.Stack
	obs     *observe.Observer
	log     *slog.Logger
	current atomic.Pointer[config.Config]

	// configMu orders configuration changes: files (the files'
	// configuration) and dynamic (the xDS one, nil without) are what the
	// configuration in force is merged from (see ApplyDynamic).
	configMu sync.Mutex
	files    *config.Config
	dynamic  *config.Config

	overrides *overrides.Store // nil: none
	modes     config.Modes     // applied to every configuration put in force
}

// Option configures a Service.
type Option func(*options)

type options struct {
	log       *slog.Logger
	version   string
	overrides *overrides.Store
	modes     config.Modes
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithVersion sets the version reported by sluice_build_info.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithModes applies envoyproxy/ratelimit's global switches (SHADOW_MODE,
// QUOTA_MODE) to every configuration the Service puts in force: the first,
// each reload's and each from xDS (see config.Config.WithModes).
func WithModes(m config.Modes) Option { return func(o *options) { o.modes = m } }

// New returns a Service deciding on st with cfg in force. Closing st is the
// caller's. When st is traced (storestack.WithTracer), so are decisions: the
// front ends start a span for each request, and the policies and outcome of
// each decision are recorded on it.
func New(st *storestack.Stack, cfg *config.Config, opts ...Option) *Service {
	o := options{log: slog.Default(), version: "devel"}
	for _, opt := range opts {
		opt(&o)
	}
	obs := observe.New(o.version, o.log, st.Tracer())
	s := &Service{Engine: engine.New(st, obs, o.overrides), stack: st, obs: obs, log: o.log, overrides: o.overrides, modes: o.modes}
	if o.overrides != nil {
		obs.Registry().MustRegister(o.overrides.Collectors()...)
	}
	s.files = cfg
	s.install(cfg)
	obs.WatchStack(st, s.Config)
	obs.WatchShares(s.Shares())
	return s
}

// Config returns the configuration in force.
func (s *Service) Config() *config.Config { return s.current.Load() }

// Stack returns the store stack the Service decides on.
func (s *Service) Stack() *storestack.Stack { return s.stack }

// Registry returns the Prometheus registry holding the Service's metrics.
func (s *Service) Registry() *prometheus.Registry { return s.obs.Registry() }

// Logger returns the Service's logger.
func (s *Service) Logger() *slog.Logger { return s.log }

// Tracer returns the tracer of the front ends over s: nil when tracing is
// off.
func (s *Service) Tracer() *tracing.Tracer { return s.obs.Tracer() }

// install puts cfg in force: every configuration, from New, Reload and
// ApplyDynamic, is finalised here.
func (s *Service) install(cfg *config.Config) {
	cfg = cfg.WithModes(s.modes)
	if ls := s.stack.Lease; ls != nil {
		ls.SetPolicies(leaseSettings(cfg))
	}
	s.obs.Install(cfg)
	s.Shares().Retain(func(name string) bool {
		p := cfg.Policy(name)
		return p != nil && p.FairShare
	})
	s.current.Store(cfg)
}
