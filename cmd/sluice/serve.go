package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/rlqs"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/tracing"
)

// serveOptions are serve's flags.
type serveOptions struct {
	configs        cli.StringList
	storeURL       string
	streamWorkers  int
	httpAddr       string
	grpcAddr       string
	healthAddr     string // "": no health port
	adminAddr      string // "": the admin API is on the HTTP port
	debugAddr      string // "": no debug port (debug.go)
	adminTokenFile string
	rlsHeaders     bool
	rlsLimitHdrs   bool
	rlsLimitNames  envoyrls.LimitHeaderNames
	logFormat      string
	logLevel       string
	shutdown       time.Duration
	drain          time.Duration // reporting not ready before shutting down; 0: none
	limits         *connLimits   // nil: defaultConnLimits
	bounds         configBounds
	xds            xdsOptions
	rl             ratelimitOptions // flags envoyproxy/ratelimit's variables needed (ratelimitenv.go)
	rlqs           rlqsOptions
}

// rlqsOptions are the rate limit quota service's caps.
type rlqsOptions struct {
	maxBuckets, maxStreams int
	firstReport            time.Duration
}

const serveDescription = `Serve runs the rate limit service. It decides over two APIs:
  HTTP  POST /v1/check {"policy":"…","key":"…","cost":1} → 200 allowed / 429 denied,
        plus GET /v1/policies, /healthz, /readyz, /readyz/store, /metrics
  gRPC  envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit (Envoy, Istio,
        Contour, Gloo, Emissary),
        envoy.service.rate_limit_quota.v3.RateLimitQuotaService (Envoy's
        rate_limit_quota filter: fair shares of each limit) and
        grpc.health.v1.Health
A third port, --health-addr, answers /healthz, /readyz, /readyz/store and
/metrics alone: point probes at it, and a flood of the other two cannot
starve them.

The store holds the counters: memory:// (the default) keeps them in this
process; redis://host:port shares them between every node using the same Redis
or Redis Cluster. The flag overrides the configuration's store.url.

A --config directory stands for every *.yaml and *.yml file in it. Without
--config, envoyproxy/ratelimit's RUNTIME_ROOT, RUNTIME_SUBDIRECTORY and
RUNTIME_APPDIRECTORY name the directory. Configuration files are watched (their
directories, and where symlinks lead, so Kubernetes ConfigMap updates and edits
of a linked file are seen) and reloaded on change and on SIGHUP. A file that fails
validation is rejected whole and the configuration in force stays.

With --xds-server, rate limit domains also come from an xDS management server
(RateLimitConfig resources over ADS, as envoyproxy/ratelimit's
CONFIG_TYPE=GRPC_XDS_SOTW); --config may then be left out. A domain defined both
there and in a file is the xDS server's. A version that fails validation is
NACKed and the configuration in force stays.

/readyz and gRPC health say whether the node answers checks: 503 and
NOT_SERVING only while starting (--xds-wait) or draining. While Redis cannot
decide the fail policy (store.on_error) answers, so the node stays ready;
/readyz/store is 503 then, for probes that must follow the store.

SIGTERM or SIGINT drains, then shuts down: for --drain, /readyz answers 503 and
gRPC health NOT_SERVING while requests are still served; then the listeners
close and in-flight requests get up to --shutdown-timeout to finish. A second
signal ends the drain early.

The admin API (POST /v1/admin/reset, /v1/admin/overrides) is on only with a
token, read from --admin-token-file or the SLUICE_ADMIN_TOKEN environment
variable: at least 32 random characters, such as those of
head -c 32 /dev/urandom | base64. With --admin-addr it leaves the HTTP port
for a port of its own.`

// newServeFlags defines serve's flags on o.
func newServeFlags(o *serveOptions, stderr io.Writer) *flag.FlagSet {
	fs := cli.NewFlagSet("sluice serve", "sluice serve --config FILE|DIR [--config FILE|DIR...] [--store URL] [--http-addr ADDR] [--grpc-addr ADDR]", serveDescription, stderr)
	fs.Var(&o.configs, "config", "a configuration `file` or directory (native or envoyproxy/ratelimit format); repeat for several")
	fs.StringVar(&o.storeURL, "store", "", "the store `URL`: memory:// or redis://host:port (default: the config's store.url, else memory://)")
	fs.StringVar(&o.httpAddr, "http-addr", ":8080", "listen `address` of the HTTP API")
	fs.StringVar(&o.grpcAddr, "grpc-addr", ":8081", "listen `address` of the gRPC API (Envoy RLS); empty turns it off")
	fs.StringVar(&o.healthAddr, "health-addr", ":8082", "listen `address` of /healthz, /readyz, /readyz/store and /metrics alone, for probes a flood of the other ports cannot starve; empty turns it off")
	fs.StringVar(&o.adminTokenFile, "admin-token-file", "", "`file` holding the bearer token that turns on the admin API")
	fs.StringVar(&o.adminAddr, "admin-addr", "", "listen `address` of the admin API, which then leaves the HTTP port (default: on the HTTP port)")
	fs.StringVar(&o.debugAddr, "debug-addr", "", "listen `address` of /metrics and the Go profiler (/debug/pprof/); keep it on loopback, e.g. 127.0.0.1:6070 (default: off)")
	fs.BoolVar(&o.rlsHeaders, "rls-headers", false, "have Envoy add RateLimit-Policy, RateLimit and Retry-After headers to responses")
	var limitHeadersOn bool
	o.rlsLimitNames, limitHeadersOn = envoyrls.LimitHeadersFromEnv(os.Getenv)
	fs.BoolVar(&o.rlsLimitHdrs, "rls-limit-headers", limitHeadersOn, "have Envoy add envoyproxy/ratelimit's RateLimit-Limit, -Remaining and -Reset headers (default: $LIMIT_RESPONSE_HEADERS_ENABLED; names: $LIMIT_LIMIT_HEADER, $LIMIT_REMAINING_HEADER, $LIMIT_RESET_HEADER)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.DurationVar(&o.drain, "drain", 5*time.Second, "on SIGTERM, how long to report not ready (/readyz 503, gRPC NOT_SERVING) while still serving, before closing the listeners")
	fs.DurationVar(&o.shutdown, "shutdown-timeout", 10*time.Second, "after the drain, how long to let in-flight requests finish")
	limits := defaultConnLimits()
	limits.addFlags(fs)
	o.limits = &limits
	o.bounds.addFlags(fs)
	o.xds.addFlags(fs, os.Getenv)
	fs.IntVar(&o.rlqs.maxBuckets, "rlqs-max-buckets", rlqs.DefaultMaxBuckets, "rate limit quota service: the most buckets one Envoy stream subscribes to; a report on one more is answered DENY_ALL")
	fs.IntVar(&o.rlqs.maxStreams, "rlqs-max-streams", rlqs.DefaultMaxStreams, "rate limit quota service: the most streams open at once; one more is refused (RESOURCE_EXHAUSTED)")
	fs.DurationVar(&o.rlqs.firstReport, "rlqs-first-report-timeout", rlqs.DefaultFirstReportTimeout, "rate limit quota service: a stream sending no report for this long after opening is closed (DEADLINE_EXCEEDED)")
	fs.IntVar(&o.streamWorkers, "grpc-stream-workers", runtime.GOMAXPROCS(0), "gRPC: goroutines reused across calls instead of one new goroutine per call (0: one per call)")
	addRatelimitFlags(fs, &o.rl, os.LookupEnv) // last: it sets defaults of the flags above too
	withEnvHelp(fs)
	return fs
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o serveOptions
	fs := newServeFlags(&o, stderr)
	if code := cli.ParseFlags(fs, args); code >= 0 {
		return code
	}
	if code := applyEnv(fs, os.LookupEnv); code >= 0 {
		return code
	}
	if code := o.rl.env.check(fs, os.LookupEnv, stderr); code >= 0 {
		return code
	}
	if msg := o.store().problem(); msg != "" {
		return cli.UsageError(fs, msg)
	}
	if o.configs = configPaths(o.configs, os.LookupEnv); len(o.configs) == 0 && o.xds.server == "" {
		return cli.UsageError(fs, "give at least one --config file or directory (try examples/sluice.yaml), or --xds-server")
	}
	if _, err := o.xds.nodeMetadata(); err != nil {
		return cli.UsageError(fs, err.Error())
	}
	if msg := o.bounds.validate(); msg != "" {
		return cli.UsageError(fs, msg)
	}
	if o.xds.maxBytes <= 0 {
		return cli.UsageError(fs, "--xds-max-bytes must be positive")
	}
	if o.rlqs.maxBuckets < 1 || o.rlqs.maxStreams < 1 || o.rlqs.firstReport <= 0 {
		return cli.UsageError(fs, "--rlqs-max-buckets and --rlqs-max-streams must be at least 1, --rlqs-first-report-timeout positive")
	}
	if msg := o.limits.validate(); msg != "" || o.drain < 0 || o.shutdown <= 0 {
		if msg == "" {
			msg = "--drain must not be negative and --shutdown-timeout must be positive"
		}
		fmt.Fprintln(stderr, "serve:", msg)
		return 2
	}
	log, err := newLogger(stderr, o.logFormat, o.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "serve:", err)
		return 2
	}
	o.rl.env.warn(log)
	srv, err := startServer(ctx, o, log)
	if err != nil {
		return cannotStart(err, stderr, log)
	}
	srv.wait()
	return 0
}

// cannotStart reports why serve or proxy could not start and returns the
// exit status, 1.
func cannotStart(err error, stderr io.Writer, log *slog.Logger) int {
	if invalid, ok := errors.AsType[*config.Error](err); ok {
		// One problem a line, file:line: field: message, as validate
		// prints them, rather than one quoted log value.
		fmt.Fprintln(stderr, err)
		log.Error("cannot start: the configuration is invalid", "problems", len(invalid.Problems))
		return 1
	}
	log.Error("cannot start", "error", err)
	return 1
}

// configLoader is how serve (at start and at every reload) and proxy load
// paths within lim: loadFiles, with the costly policies logged.
func configLoader(paths []string, store storeFlags, lim config.Limits, log *slog.Logger) func() (*config.Config, error) {
	return func() (*config.Config, error) {
		cfg, err := loadFiles(paths, store, lim)
		if err == nil {
			for _, w := range cfg.Warnings() {
				log.Warn("costly policy", "warning", w)
			}
		}
		return cfg, err
	}
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// server is a running `sluice serve`: its listeners, servers and the
// goroutines that must end before it returns.
type server struct {
	*drainer
	svc        *service.Service
	httpAddr   net.Addr
	grpcAddr   net.Addr // nil when gRPC is off
	healthAddr net.Addr // nil without a health port
	adminAddr  net.Addr // nil when the admin API is on the HTTP port, or off
	debugAddr  net.Addr // nil without a debug port
	done       chan struct{}
	shutdown   context.CancelFunc // begins the shutdown, as SIGTERM does
}

// startServer loads the configuration, opens the store, starts listening and
// serving, and returns; the server runs until ctx ends.
func startServer(ctx context.Context, o serveOptions, log *slog.Logger) (_ *server, err error) {
	// What is opened is closed, last first, by a start that fails or by
	// the shutdown of one that started.
	var opened undo
	defer func() {
		if err != nil {
			opened.run()
		}
	}()
	paths := []string(o.configs)
	load := configLoader(paths, o.store(), o.bounds.limits(), log)
	// Taken before the load, so the watch reloads a file changed while the
	// server starts.
	since := service.Fingerprint(paths)
	cfg, err := o.rl.firstLoad(paths, o.store(), load, log)
	if err != nil {
		return nil, err
	}
	storeCfg := o.store().section(cfg)
	token, err := adminToken(o.adminTokenFile)
	if err != nil {
		return nil, err
	}
	if o.adminAddr != "" && token == "" {
		return nil, errors.New("--admin-addr needs an admin token (--admin-token-file or SLUICE_ADMIN_TOKEN)")
	}
	tracer, stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return nil, err
	}
	opened.add(stopTracing) // the last spans are flushed after the last decision
	svc, err := openService(ctx, cfg, storeCfg, tracer, log, &opened, service.WithModes(o.rl.modes))
	if err != nil {
		return nil, err
	}
	xds, err := o.xds.client(svc, o.bounds.limits(), log)
	if err != nil {
		return nil, err
	}
	grpcTLS, err := o.rl.grpcTLS.serverOption(log)
	if err != nil {
		return nil, err
	}
	limits := o.limits
	if limits == nil {
		l := defaultConnLimits()
		limits = &l
	}
	lns, err := listenAll(listenSpec{"--http-addr", o.httpAddr}, listenSpec{"--grpc-addr", o.grpcAddr},
		listenSpec{"--health-addr", o.healthAddr}, listenSpec{"--admin-addr", o.adminAddr}, listenSpec{"--debug-addr", o.debugAddr})
	if err != nil {
		return nil, err
	}
	s := &server{drainer: newDrainer(log), svc: svc, httpAddr: lns[0].Addr(), grpcAddr: addrOf(lns[1]),
		healthAddr: addrOf(lns[2]), adminAddr: addrOf(lns[3]), debugAddr: addrOf(lns[4]), done: make(chan struct{})}
	ctx, s.shutdown = context.WithCancel(ctx)
	rlsOpts := []envoyrls.Option{envoyrls.WithHeaders(o.rlsHeaders), envoyrls.WithDynamicMetadata(o.rl.dynamicMetadata)}
	if o.rlsLimitHdrs {
		rlsOpts = append(rlsOpts, envoyrls.WithLimitHeaders(o.rlsLimitNames))
	}
	rls := envoyrls.New(svc, rlsOpts...)
	// Readiness has one rule on both APIs: not while starting or draining.
	// The store's health is not part of it, since the fail policy answers
	// while the store cannot (/readyz/store is the strict check), unless
	// ratelimit's health flags say so: gRPC health then follows /healthcheck.
	serving := newHealthFollower(rls.SetServing, o.rl.health, svc, log)
	starting := o.xds.waitingFor(ctx, xds, log, serving.xds)
	apiOpts := []httpapi.Option{httpapi.WithDraining(s.draining.Load), httpapi.WithStarting(starting),
		httpapi.WithHealthcheck(o.rl.health), httpapi.WithRoute("POST", "/json", rls.JSONHandler())}
	adminOpts := append(slices.Clone(apiOpts), httpapi.WithAdminToken(token))
	ps := &ports{limits: limits, reg: svc.Registry(), log: log}
	if token != "" && o.adminAddr == "" {
		ps.serveHTTP("http", lns[0], httpapi.New(svc, adminOpts...), healthPort)
	} else {
		ps.serveHTTP("http", lns[0], httpapi.New(svc, apiOpts...), healthPort)
	}
	if o.healthAddr != "" {
		ps.serveHTTP("health", lns[2], httpapi.Health(svc, apiOpts...), healthPort)
	}
	if o.adminAddr != "" {
		ps.serveHTTP("admin", lns[3], httpapi.Admin(svc, adminOpts...), plainPort)
	}
	if o.debugAddr != "" {
		ps.serveHTTP("debug", lns[4], debugHandler(svc.Registry()), plainPort)
	}
	// Stream workers reuse goroutines instead of starting one per RPC, which
	// spares the stack growth that was ~12% of CPU under load (measured in
	// docs/benchmarks.md).
	grpcOpts := limits.grpcOptions()
	if grpcTLS != nil {
		grpcOpts = append(grpcOpts, grpcTLS)
	}
	if o.streamWorkers > 0 {
		grpcOpts = append(grpcOpts, grpc.NumStreamWorkers(uint32(o.streamWorkers)))
	}
	grpcSrv := grpc.NewServer(grpcOpts...)
	rls.Register(grpcSrv)
	quota := rlqs.New(svc, o.rlqs.serverOptions()...)
	quota.Register(grpcSrv)
	if o.grpcAddr != "" {
		ps.serveGRPC(lns[1], grpcSrv)
	}
	var wg sync.WaitGroup
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watchConfig(watchCtx, &wg, svc, paths, since, load, log)
	wg.Go(func() { runXDS(watchCtx, xds) })
	wg.Go(func() { serving.run(watchCtx) })
	wg.Go(func() { quota.Run(watchCtx.Done()) })
	log.Info("sluice serving", "version", buildVersion(), "store", storestack.RedactURL(storeCfg.URL), "store_per_second", storestack.RedactURL(storeCfg.PerSecondURL),
		"http", s.httpAddr.String(), "grpc", addrString(s.grpcAddr), "health", addrString(s.healthAddr), "admin", addrString(s.adminAddr), "debug", addrString(s.debugAddr),
		"policies", len(cfg.Policies), "domains", len(cfg.Domains), "admin_api", token != "", "xds", o.xds.server)

	go func() {
		defer close(s.done)
		defer s.shutdown()
		<-ctx.Done()
		stopWatch()
		s.drain(o.drain, rls.Shutdown)
		// Quota streams last as long as their Envoys: ended here, the
		// Envoys reconnect to other nodes, and the graceful stop need not
		// wait them out.
		quota.Shutdown()
		s.stop(o.shutdown, grpcSrv, ps.servers...)
		ps.wait()
		wg.Wait()
		opened.run()
		log.Info("stopped")
	}()
	return s, nil
}

// openService opens the store stack of storeCfg and the overrides beside it
// and returns the service deciding on them with cfg in force, traced by
// tracer (nil: off), with opts; what it opened is added to opened.
func openService(ctx context.Context, cfg *config.Config, storeCfg config.Store, tracer *tracing.Tracer,
	log *slog.Logger, opened *undo, opts ...service.Option) (*service.Service, error) {
	st, err := storestack.Open(storeCfg, storestack.WithLogger(log), storestack.WithTracer(tracer))
	if err != nil {
		return nil, err
	}
	opened.add(func() { st.Close() })
	// Overrides live where the counters do: in Redis every node shares them.
	ov, closeOverrides, err := service.OpenOverrides(ctx, storeCfg, log)
	if err != nil {
		return nil, err
	}
	opened.add(closeOverrides)
	opts = append([]service.Option{service.WithLogger(log), service.WithVersion(buildVersion()), service.WithOverrides(ov)}, opts...)
	return service.New(st, cfg, opts...), nil
}

// serverOptions are the rate limit quota server's options. A zero field
// (a serveOptions built in code, not by its flags) takes the default.
func (o rlqsOptions) serverOptions() []rlqs.Option {
	var opts []rlqs.Option
	if o.maxBuckets > 0 {
		opts = append(opts, rlqs.WithMaxBuckets(o.maxBuckets))
	}
	if o.maxStreams > 0 {
		opts = append(opts, rlqs.WithMaxStreams(o.maxStreams))
	}
	if o.firstReport > 0 {
		opts = append(opts, rlqs.WithFirstReportTimeout(o.firstReport))
	}
	return opts
}

// store is what serve's flags and environment say of the store.
func (o *serveOptions) store() storeFlags {
	return storeFlags{url: o.storeURL, perSecond: o.rl.perSecond, keyPrefix: o.rl.keyPrefix, env: o.rl.env}
}

// wait blocks until the server has shut down.
func (s *server) wait() { <-s.done }

// addrOf is ln's address, nil for no listener.
func addrOf(ln net.Listener) net.Addr {
	if ln == nil {
		return nil
	}
	return ln.Addr()
}

func addrString(a net.Addr) string {
	if a == nil {
		return "off"
	}
	return a.String()
}
