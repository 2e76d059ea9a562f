package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpapi"
)

// envoyproxy/ratelimit's environment.
//
// serve reads the variables envoyproxy/ratelimit reads, so that its
// container manifests work unchanged. Each one Sluice has a meaning for
// becomes the default of the flag that means it; so a flag on the command
// line wins, then its SLUICE_* variable, then ratelimit's, then Sluice's
// default. The others are named in one warning at start, with what Sluice
// does instead (ratelimitignored.go).

// ratelimitOptions are serve's options whose defaults come from
// envoyproxy/ratelimit's environment, beside the flags that already existed.
type ratelimitOptions struct {
	keyPrefix       string              // --store-key-prefix
	perSecond       string              // --store-per-second
	dynamicMetadata bool                // --rls-dynamic-metadata
	health          httpapi.Healthcheck // --healthcheck-store, --healthcheck-domains
	startEmpty      bool                // --start-without-config
	grpcTLS         grpcTLSOptions      // --grpc-tls-*
	modes           config.Modes        // --shadow-mode, --quota-mode

	env *ratelimitEnv // what the environment said, for the checks and the warning
}

// ratelimitEnv is what envoyproxy/ratelimit's variables say.
type ratelimitEnv struct {
	lookup   func(string) (string, bool)
	defaults map[string]string // flag name → its default from the variables
	from     map[string]string // flag name → the variables it came from, for messages
	problems map[string]string // flag name → why its variables cannot be used
	storeTLS *config.TLS       // REDIS_TLS_*, with the store URL they go with
	ignored  []string          // "NAME: what Sluice does instead", for the warning
}

// addRatelimitFlags defines the flags only ratelimit's variables needed, on
// fs, and sets the defaults of every flag (these and those defined before)
// from the variables lookup finds.
func addRatelimitFlags(fs *flag.FlagSet, o *ratelimitOptions, lookup func(string) (string, bool)) {
	addStoreFlags(fs, &o.perSecond, &o.keyPrefix)
	fs.BoolVar(&o.dynamicMetadata, "rls-dynamic-metadata", false, "answer every Envoy rate limit request with the request in dynamic_metadata, as envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA")
	fs.BoolVar(&o.health.Store, "healthcheck-store", false, "GET /healthcheck fails, and gRPC health is NOT_SERVING, while the store does not decide (envoyproxy/ratelimit's REDIS_HEALTH_CHECK_ACTIVE_CONNECTION)")
	fs.BoolVar(&o.health.Domains, "healthcheck-domains", false, "GET /healthcheck fails, and gRPC health is NOT_SERVING, while no rate limit domain is loaded (envoyproxy/ratelimit's HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED)")
	fs.BoolVar(&o.startEmpty, "start-without-config", false, "start even when the --config directories hold no file yet, and take the configuration when files or the xDS server bring it (envoyproxy/ratelimit's FORCE_START_WITHOUT_INITIAL_CONFIG)")
	fs.BoolVar(&o.modes.Shadow, "shadow-mode", false, "every limit of the rate limit domains (envoyproxy/ratelimit-format files and xDS) in shadow mode, and no request to them denied (envoyproxy/ratelimit's SHADOW_MODE)")
	fs.BoolVar(&o.modes.Quota, "quota-mode", false, "every limit of the rate limit domains in quota mode, as quota_mode: true on each descriptor (envoyproxy/ratelimit's QUOTA_MODE)")
	o.grpcTLS.addFlags(fs)
	o.env = readRatelimitEnv(lookup)
	o.env.setDefaults(fs)
}

// setDefaults sets the default of each flag of fs the variables give one.
func (e *ratelimitEnv) setDefaults(fs *flag.FlagSet) {
	for name, v := range e.defaults {
		if f := fs.Lookup(name); f != nil && f.Value.Set(v) == nil {
			f.DefValue = v
		}
	}
}

// readRatelimitEnv maps the variables lookup finds to flag defaults.
func readRatelimitEnv(lookup func(string) (string, bool)) *ratelimitEnv {
	e := &ratelimitEnv{lookup: lookup, defaults: map[string]string{}, from: map[string]string{}, problems: map[string]string{}}
	e.listen("http-addr", "HOST", "PORT", "", "8080")
	e.listen("grpc-addr", "GRPC_HOST", "GRPC_PORT", "", "8081")
	// ratelimit's debug port listens on every address unless DEBUG_HOST
	// says otherwise; Sluice's, which serves the profiler, on loopback.
	e.listen("debug-addr", "DEBUG_HOST", "DEBUG_PORT", "127.0.0.1", "6070")
	if vars, ok := e.from["http-addr"]; ok {
		// ratelimit has no health port: its manifests probe /healthcheck on
		// PORT, which the HTTP port's health reserve keeps answering under a
		// flood; and replicas given only its variables must not all claim
		// serve's own :8082.
		e.set("health-addr", vars, "", "")
	} else if vars, ok := e.from["grpc-addr"]; ok {
		e.set("health-addr", vars, "", "")
	}
	e.duration("grpc-max-conn-age", "GRPC_MAX_CONNECTION_AGE")
	e.duration("grpc-max-conn-age-grace", "GRPC_MAX_CONNECTION_AGE_GRACE")
	if v, ok := lookup("LOG_LEVEL"); ok {
		e.set("log-level", "LOG_LEVEL", logLevelOf(v), "")
		if logLevelOf(v) == "" {
			e.problems["log-level"] = fmt.Sprintf("LOG_LEVEL=%q: want trace, debug, info, warn, error, fatal or panic", v)
		}
	}
	if v, ok := lookup("LOG_FORMAT"); ok {
		// As ratelimit: json is JSON, anything else text.
		format := "text"
		if strings.EqualFold(strings.TrimSpace(v), "json") {
			format = "json"
		}
		e.set("log-format", "LOG_FORMAT", format, "")
	}
	e.variable("store-key-prefix", "CACHE_KEY_PREFIX", nil)
	e.variable("rls-dynamic-metadata", "RESPONSE_DYNAMIC_METADATA", parseBool)
	e.variable("healthcheck-store", "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", parseBool)
	e.variable("healthcheck-domains", "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", parseBool)
	e.variable("start-without-config", "FORCE_START_WITHOUT_INITIAL_CONFIG", parseBool)
	e.variable("shadow-mode", "SHADOW_MODE", parseBool)
	e.variable("quota-mode", "QUOTA_MODE", parseBool)
	if e.defaults["start-without-config"] == "true" {
		// ratelimit then starts at once instead of waiting for the xDS
		// server's first version; readiness does not wait either.
		e.set("xds-wait", "FORCE_START_WITHOUT_INITIAL_CONFIG", "0s", "")
	}
	e.grpcTLS()
	e.store()
	e.perSecondStore()
	e.ignored = ignoredVariables(lookup)
	return e
}

// set records flag's default v, from the variables vars; problem, when not
// "", is why they cannot be used.
func (e *ratelimitEnv) set(flag, vars, v, problem string) {
	e.defaults[flag], e.from[flag] = v, vars
	if problem != "" {
		e.problems[flag] = problem
	}
}

// parseBool parses a boolean as ratelimit's envconfig does.
func parseBool(v string) (string, error) {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	return strconv.FormatBool(b), err
}

// variable maps variable name to flag's default through parse (nil: the
// value as it is).
func (e *ratelimitEnv) variable(flag, name string, parse func(string) (string, error)) {
	v, ok := e.lookup(name)
	if !ok {
		return
	}
	if parse == nil {
		e.set(flag, name, v, "")
		return
	}
	parsed, err := parse(v)
	problem := ""
	if err != nil {
		problem = fmt.Sprintf("%s=%q: want true or false", name, v)
	}
	e.set(flag, name, parsed, problem)
}

// duration maps a duration variable to flag's default.
func (e *ratelimitEnv) duration(flag, name string) {
	v, ok := e.lookup(name)
	if !ok {
		return
	}
	problem := ""
	if _, err := time.ParseDuration(strings.TrimSpace(v)); err != nil {
		problem = fmt.Sprintf("%s=%q: want a duration such as 30m or 24h", name, v)
	}
	e.set(flag, name, strings.TrimSpace(v), problem)
}

// listen maps a HOST/PORT pair to a listen address flag's default; either
// may be left out (defHost, "" for all addresses, and defPort).
func (e *ratelimitEnv) listen(flag, hostVar, portVar, defHost, defPort string) {
	host, hasHost := e.lookup(hostVar)
	port, hasPort := e.lookup(portVar)
	if !hasHost && !hasPort {
		return
	}
	if !hasHost {
		host = defHost
	}
	problem := ""
	if !hasPort {
		port = defPort
	} else if n, err := strconv.Atoi(strings.TrimSpace(port)); err != nil || n < 0 || n > 65535 {
		problem = fmt.Sprintf("%s=%q: want a port number", portVar, port)
	}
	e.set(flag, hostVar+", "+portVar, net.JoinHostPort(strings.TrimSpace(host), strings.TrimSpace(port)), problem)
}

// logLevelOf maps a logrus level, as ratelimit's LOG_LEVEL takes it, to
// serve's --log-level; "" when it is none.
func logLevelOf(v string) string {
	switch l := strings.ToLower(strings.TrimSpace(v)); l {
	case "trace", "debug":
		return "debug"
	case "info", "error":
		return l
	case "warn", "warning":
		return "warn"
	case "fatal", "panic":
		return "error"
	}
	return ""
}

// store maps ratelimit's BACKEND_TYPE and REDIS_* variables to --store (and
// the TLS files that go with it) when any of them is set.
func (e *ratelimitEnv) store() {
	backend, hasBackend := e.lookup("BACKEND_TYPE")
	any := hasBackend
	for _, name := range []string{"REDIS_URL", "REDIS_SOCKET_TYPE", "REDIS_TYPE", "REDIS_AUTH", "REDIS_TLS"} {
		if _, ok := e.lookup(name); ok {
			any = true
		}
	}
	if !any {
		return
	}
	switch b := strings.ToLower(strings.TrimSpace(backend)); b {
	case "", "redis":
	case "memcache":
		e.set("store", "BACKEND_TYPE", "", "BACKEND_TYPE=memcache: Sluice has no memcache store; use Redis (BACKEND_TYPE=redis and REDIS_URL, or --store redis://host:port) or the memory store (--store memory://)")
		return
	default:
		e.set("store", "BACKEND_TYPE", "", fmt.Sprintf("BACKEND_TYPE=%q: want redis (Sluice has no %s store)", backend, b))
		return
	}
	u, tc, problem := ratelimitRedisURL(e.lookup, "REDIS", "/var/run/nutcracker/ratelimit.sock")
	e.set("store", "REDIS_*", u, problem)
	e.storeTLS = tc
}

// perSecondStore maps ratelimit's REDIS_PERSECOND=true and its
// REDIS_PERSECOND_* variables to --store-per-second.
func (e *ratelimitEnv) perSecondStore() {
	v, ok := e.lookup("REDIS_PERSECOND")
	if !ok {
		return
	}
	on, err := parseBool(v)
	switch {
	case err != nil:
		e.set("store-per-second", "REDIS_PERSECOND", "", fmt.Sprintf("REDIS_PERSECOND=%q: want true or false", v))
	case on == "true":
		u, _, problem := ratelimitRedisURL(e.lookup, "REDIS_PERSECOND", "/var/run/nutcracker/ratelimitpersecond.sock")
		e.set("store-per-second", "REDIS_PERSECOND_*", u, problem)
	}
}

// ratelimitRedisURL builds the store URL ratelimit's variables of one
// Redis describe — prefix_URL, _SOCKET_TYPE, _TYPE, _AUTH and _TLS, prefix
// REDIS or REDIS_PERSECOND — with their defaults (a unix socket at
// socketPath), and the TLS files REDIS_TLS_* name.
func ratelimitRedisURL(lookup func(string) (string, bool), prefix, socketPath string) (string, *config.TLS, string) {
	get := func(name, def string) string {
		if v, ok := lookup(name); ok {
			return strings.TrimSpace(v)
		}
		return def
	}
	addr := get(prefix+"_URL", socketPath)
	socket := strings.ToLower(get(prefix+"_SOCKET_TYPE", "unix"))
	kind := strings.ToLower(get(prefix+"_TYPE", "single"))
	useTLS, err := strconv.ParseBool(get(prefix+"_TLS", "false"))
	if err != nil {
		return "", nil, fmt.Sprintf("%s_TLS=%q: want true or false", prefix, get(prefix+"_TLS", ""))
	}
	var user *url.Userinfo
	if auth := get(prefix+"_AUTH", ""); auth != "" {
		// As ratelimit: "user:password", or a password alone.
		if name, pass, ok := strings.Cut(auth, ":"); ok {
			user = url.UserPassword(name, pass)
		} else {
			user = url.UserPassword("", auth)
		}
	}
	u := url.URL{Scheme: "redis", User: user}
	if useTLS {
		u.Scheme = "rediss"
	}
	switch socket {
	case "unix":
		if kind != "single" {
			return "", nil, fmt.Sprintf("%s_SOCKET_TYPE=unix with %s_TYPE=%s: a %s is reached over tcp", prefix, prefix, kind, kind)
		}
		if useTLS {
			return "", nil, prefix + "_TLS=true with " + prefix + "_SOCKET_TYPE=unix: Sluice does not run TLS over a unix socket"
		}
		u.Scheme, u.Path = "unix", addr
		return u.String(), nil, ""
	case "tcp":
	default:
		return "", nil, fmt.Sprintf("%s_SOCKET_TYPE=%q: want unix or tcp", prefix, socket)
	}
	hosts := strings.Split(addr, ",")
	for i := range hosts {
		hosts[i] = strings.TrimSpace(hosts[i])
	}
	q := url.Values{}
	switch kind {
	case "single":
		if len(hosts) != 1 {
			return "", nil, fmt.Sprintf("%s_URL=%q: %s_TYPE=single takes one host:port", prefix, addr, prefix)
		}
	case "sentinel":
		// The master's name, then the sentinels.
		if len(hosts) < 2 {
			return "", nil, fmt.Sprintf("%s_URL=%q: %s_TYPE=sentinel takes the master's name, then host:port of each sentinel", prefix, addr, prefix)
		}
		q.Set("master_set", hosts[0])
		hosts = hosts[1:]
	case "cluster":
	default:
		return "", nil, fmt.Sprintf("%s_TYPE=%q: want single, sentinel or cluster", prefix, kind)
	}
	for _, h := range hosts {
		if _, _, err := net.SplitHostPort(h); err != nil {
			return "", nil, fmt.Sprintf("%s_URL=%q: %q is not host:port", prefix, addr, h)
		}
	}
	u.Host = hosts[0]
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	u.RawQuery = q.Encode()
	var tc *config.TLS
	if useTLS {
		tc = &config.TLS{CAFile: get("REDIS_TLS_CACERT", ""), CertFile: get("REDIS_TLS_CLIENT_CERT", ""), KeyFile: get("REDIS_TLS_CLIENT_KEY", "")}
		if skip, _ := strconv.ParseBool(get("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "false")); skip {
			tc.InsecureSkipVerify = true
		}
	}
	return u.String(), tc, ""
}

// check reports, for the flags fs's command line and SLUICE_* variables
// left to ratelimit's variables, why those cannot be used; it returns the
// exit status to stop with, or -1.
func (e *ratelimitEnv) check(fs *flag.FlagSet, lookup func(string) (string, bool), stderr io.Writer) int {
	if e == nil {
		return -1
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	code := -1
	fs.VisitAll(func(f *flag.Flag) {
		problem, ok := e.problems[f.Name]
		if !ok || given[f.Name] {
			return
		}
		if _, set := lookup(envName(f.Name)); set {
			return
		}
		fmt.Fprintf(stderr, "sluice %s: %s (envoyproxy/ratelimit's variable; --%s or %s overrides it)\n", fs.Name(), problem, f.Name, envName(f.Name))
		code = 2
	})
	return code
}

// usedStoreTLS is the store's TLS section from REDIS_TLS_* when the store
// URL in force is the one ratelimit's variables built; nil otherwise (and
// without them: e may be nil).
func (e *ratelimitEnv) usedStoreTLS(storeURL string) *config.TLS {
	if e != nil && e.storeTLS != nil && storeURL == e.defaults["store"] {
		return e.storeTLS
	}
	return nil
}

// warn logs, once, the ratelimit variables that are set but that Sluice
// does not honour, each with what it does instead.
func (e *ratelimitEnv) warn(log *slog.Logger) {
	if e != nil && len(e.ignored) > 0 {
		log.Warn("envoyproxy/ratelimit variables ignored", "variables", strings.Join(e.ignored, "; "))
	}
}

// firstLoad is serve's first load of the configuration. With
// --start-without-config, directories that hold no configuration file yet
// load as an empty configuration, and the watch takes the files when they
// come; later reloads need files, so that removing them all does not drop
// every limit.
func (o *ratelimitOptions) firstLoad(paths []string, store storeFlags, load func() (*config.Config, error), log *slog.Logger) (*config.Config, error) {
	if o.startEmpty && len(paths) > 0 && noConfigFiles(paths) {
		log.Warn("starting without configuration: no file in the configuration directories yet", "config", strings.Join(paths, ","))
		return loadFiles(nil, store, config.Limits{}) // no files: no bounds to apply
	}
	return load()
}

// noConfigFiles reports whether every path is a readable directory without
// a configuration file in it.
func noConfigFiles(paths []string) bool {
	for _, p := range paths {
		if _, err := os.ReadDir(p); err != nil {
			return false
		}
		if files, err := config.Expand(p); err == nil && len(files) > 0 {
			return false
		}
	}
	return true
}
