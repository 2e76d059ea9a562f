package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/proxy"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
)

// proxyOptions are proxy's flags.
type proxyOptions struct {
	configs    cli.StringList
	upstream   string
	fwdAuth    bool
	listen     string
	healthAddr string // "": no health port
	storeURL   string
	logFormat  string
	logLevel   string
	shutdown   time.Duration
	drain      time.Duration
	limits     *connLimits // nil: defaultProxyLimits
}

const proxyDescription = `Proxy puts rate limits in front of an HTTP service without changing it:
it listens for requests, applies the limits of the first matching route in
the configuration's proxy: section, and forwards the requests it admits to
the upstream. Denied requests get 429 Too Many Requests with Retry-After and
never reach the upstream; allowed responses carry RateLimit-Policy and
RateLimit fields. A request that matches no route is forwarded unlimited.

  sluice proxy --config examples/proxy.yaml --upstream http://127.0.0.1:9000

The routes and the policies they use come from the --config files (native
format; see examples/proxy.yaml). The store holds the counters: memory://
(the default) keeps them in this process; redis://host:port shares them
between every proxy using the same Redis, so that a limit holds across all of
them. The flag overrides the configuration's store.url.

An upstream that cannot be reached gives 502 (504 when it does not answer
within 60 s). The configuration files are watched and reloaded on change and
on SIGHUP, as serve's are; one that fails validation, or has no proxy:
section, is rejected whole and the configuration in force stays. Limits set
at runtime (serve's /v1/admin/overrides) apply here too when the store is a
Redis both share.

A second port, --health-addr (:8082, as serve's), answers GET /healthz,
/readyz (503 only while draining: the fail policy answers while Redis
cannot), /readyz/store (also 503 while the store does not decide) and
/metrics, as serve's HTTP API does; a flood of the proxy port cannot starve
it. SIGTERM or SIGINT drains, then shuts down: for --drain, /readyz answers
503 while requests are still proxied; then the listeners close and in-flight
requests get up to --shutdown-timeout to finish. A second signal ends the
drain early.

With --forward-auth instead of --upstream, it forwards nothing: it answers a
gateway's forward-auth requests (Traefik ForwardAuth, Caddy forward_auth,
nginx auth_request) on /v1/forward-auth — 200 to let the request through, 429
with Retry-After to deny it — and on /v1/forward-auth/nginx, which denies with
403 for nginx. The gateway must be in proxy.trusted_proxies for the client
address it sends in X-Forwarded-For to count. See docs/gateways.md.`

// defaultProxyLimits are serve's HTTP limits with a minimum body rate
// instead of a whole-request read timeout, which would cut the long uploads
// the upstream is entitled to.
func defaultProxyLimits() connLimits {
	l := defaultConnLimits()
	l.httpRead = 0
	l.httpMinBodyRate = 1024
	return l
}

// newProxyFlags defines proxy's flags on o.
func newProxyFlags(o *proxyOptions, stderr io.Writer) *flag.FlagSet {
	fs := cli.NewFlagSet("sluice proxy", "sluice proxy --config FILE [--config FILE...] --upstream URL|--forward-auth [--listen ADDR] [--store URL]", proxyDescription, stderr)
	fs.Var(&o.configs, "config", "a configuration `file` with a proxy: section and policies; repeat for several")
	fs.StringVar(&o.upstream, "upstream", "", "the `URL` of the service to forward to, such as http://127.0.0.1:9000 (required)")
	fs.BoolVar(&o.fwdAuth, "forward-auth", false, "forward nothing: answer a gateway's forward-auth requests on /v1/forward-auth (and /v1/forward-auth/nginx)")
	fs.StringVar(&o.listen, "listen", ":8080", "listen `address` of the proxy")
	fs.StringVar(&o.healthAddr, "health-addr", ":8082", "listen `address` of /healthz, /readyz and /metrics; empty turns it off")
	fs.StringVar(&o.storeURL, "store", "", "the store `URL`: memory:// or redis://host:port (default: the config's store.url, else memory://)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.DurationVar(&o.drain, "drain", 5*time.Second, "on SIGTERM, how long to report not ready (/readyz 503) while still proxying, before closing the listeners")
	fs.DurationVar(&o.shutdown, "shutdown-timeout", 10*time.Second, "after the drain, how long to let in-flight requests finish")
	limits := defaultProxyLimits()
	limits.addHTTPFlags(fs)
	fs.IntVar(&limits.httpMinBodyRate, "http-min-body-rate", limits.httpMinBodyRate, "HTTP: bytes per second a request body must average after the first --http-read-header-timeout; slower ones are cut with 408 (0: no minimum)")
	o.limits = &limits
	withEnvHelp(fs)
	return fs
}

func runProxy(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o proxyOptions
	fs := newProxyFlags(&o, stderr)
	if code := cli.ParseFlags(fs, args); code >= 0 {
		return code
	}
	if code := applyEnv(fs, os.LookupEnv); code >= 0 {
		return code
	}
	if len(o.configs) == 0 {
		fmt.Fprintln(stderr, "proxy: give at least one --config file (try examples/proxy.yaml)")
		return 2
	}
	if o.upstream == "" && !o.fwdAuth {
		fmt.Fprintln(stderr, "proxy: give the --upstream URL to forward to, such as http://127.0.0.1:9000, or --forward-auth")
		return 2
	}
	if o.upstream != "" && o.fwdAuth {
		fmt.Fprintln(stderr, "proxy: --forward-auth forwards nothing: give it or --upstream, not both")
		return 2
	}
	if msg := o.limits.validateHTTP(); msg != "" || o.drain < 0 || o.shutdown <= 0 {
		if msg == "" {
			msg = "--drain must not be negative and --shutdown-timeout must be positive"
		}
		fmt.Fprintln(stderr, "proxy:", msg)
		return 2
	}
	log, err := newLogger(stderr, o.logFormat, o.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "proxy:", err)
		return 2
	}
	srv, err := startProxy(ctx, o, log)
	if err != nil {
		return cannotStart(err, stderr, log)
	}
	srv.wait()
	return 0
}

// proxyServer is a running `sluice proxy`.
type proxyServer struct {
	*drainer
	addr       net.Addr
	healthAddr net.Addr // nil without a health port
	done       chan struct{}
}

// wait blocks until the proxy has shut down.
func (s *proxyServer) wait() { <-s.done }

// parseUpstream checks the --upstream URL: a bare host:port is refused
// rather than guessed, since http vs https matters.
func parseUpstream(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--upstream %s: want an http:// or https:// URL with a host, such as http://127.0.0.1:9000",
			storestack.RedactURL(raw))
	}
	return u, nil
}

// startProxy loads the configuration as serve does, opens the store and the
// overrides, starts listening and serving, and returns; the proxy runs until
// ctx ends, then drains and stops as serve does. Like serve it reloads the
// configuration when its files change and on SIGHUP.
func startProxy(ctx context.Context, o proxyOptions, log *slog.Logger) (_ *proxyServer, err error) {
	var opened undo
	defer func() {
		if err != nil {
			opened.run()
		}
	}()
	var upstream *url.URL // nil with --forward-auth
	if !o.fwdAuth {
		if upstream, err = parseUpstream(o.upstream); err != nil {
			return nil, err
		}
	}
	paths := []string(o.configs)
	store := storeFlags{url: o.storeURL}
	load := proxyLoader(configLoader(paths, store, config.Limits{}, log))
	since := service.Fingerprint(paths)
	cfg, err := load()
	if err != nil {
		return nil, err
	}
	storeCfg := store.section(cfg)
	svc, err := openService(ctx, cfg, storeCfg, nil, log, &opened)
	if err != nil {
		return nil, err
	}
	limits := o.limits
	if limits == nil {
		l := defaultProxyLimits()
		limits = &l
	}
	h, target, err := proxyHandler(svc, upstream, proxy.Logger(log),
		proxy.MinBodyRate(int64(limits.httpMinBodyRate), limits.httpReadHeader))
	if err != nil {
		return nil, err
	}
	lns, err := listenAll(listenSpec{"--listen", o.listen}, listenSpec{"--health-addr", o.healthAddr})
	if err != nil {
		return nil, err
	}
	s := &proxyServer{drainer: newDrainer(log), addr: lns[0].Addr(), healthAddr: addrOf(lns[1]), done: make(chan struct{})}
	ps := &ports{limits: limits, reg: svc.Registry(), log: log}
	ps.serveHTTP("http", lns[0], h, plainPort)
	if o.healthAddr != "" {
		ps.serveHTTP("health", lns[1], httpapi.Health(svc, httpapi.WithDraining(s.draining.Load)), healthPort)
	}
	var wg sync.WaitGroup
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watchConfig(watchCtx, &wg, svc, paths, since, load, log)
	log.Info("sluice proxying", "version", buildVersion(), "listen", s.addr.String(), "health", addrString(s.healthAddr),
		"upstream", target, "store", storestack.RedactURL(storeCfg.URL), "routes", len(cfg.Proxy.Routes))

	go func() {
		defer close(s.done)
		<-ctx.Done()
		stopWatch()
		s.drain(o.drain, func() {})
		s.stop(o.shutdown, nil, ps.servers...)
		ps.wait()
		wg.Wait()
		opened.run()
		log.Info("stopped")
	}()
	return s, nil
}

// proxyLoader is load refusing a configuration without a proxy: section,
// at start and at every reload (which then keeps the one in force).
func proxyLoader(load func() (*config.Config, error)) func() (*config.Config, error) {
	return func() (*config.Config, error) {
		cfg, err := load()
		if err == nil && cfg.Proxy == nil {
			return nil, errors.New("no proxy: section in the configuration files; see examples/proxy.yaml")
		}
		return cfg, err
	}
}

// proxyHandler is the reverse proxy to upstream or, when upstream is nil
// (--forward-auth), the forward-auth endpoint; target says which, for the log.
func proxyHandler(svc *service.Service, upstream *url.URL, opts ...proxy.Option) (h http.Handler, target string, err error) {
	if upstream == nil {
		h, err = proxy.ForwardAuth(svc, opts...)
		return h, "none (forward-auth)", err
	}
	h, err = proxy.New(svc, upstream, opts...)
	return h, upstream.Redacted(), err
}
