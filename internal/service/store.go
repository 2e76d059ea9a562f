package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/redisstore"
)

// OpenStore opens the store cfg.URL names:
//
//	memory:// (or "")                the embedded memory store: one process, no
//	                                 sharing between nodes
//	redis://[user:pass@]host:port    Redis, a Cluster (add ?addr=host:port for
//	rediss://…  unix://…             more seed nodes) or Sentinel; see redisstore.Open
//
// A Redis store is opened lazily — the service starts while Redis is down and
// connects when it can — and wrapped in a failover.Store applying cfg's fail
// policy (local unless set), timeout (adaptive unless set) and circuit
// breaker; with cfg.Lease, that in a lease.Store (close gives the unused
// quota back). Breaker transitions, and once how the store runs its Lua
// (functions or scripts, and why), are logged on log (nil:
// slog.Default()). close releases the store's connections.
func OpenStore(cfg config.Store, log *slog.Logger) (store sluice.Store, close func(), err error) {
	if log == nil {
		log = slog.Default()
	}
	rc, problems := readStore(cfg)
	if len(problems) > 0 {
		return nil, nil, problems[0]
	}
	if rc == nil {
		return memory.New(memoryOptions(cfg, log.With("store", "memory"))...), func() {}, nil
	}
	for _, w := range StoreWarnings(cfg) {
		log.Warn("store", "warning", w)
	}
	rs, err := openRedis(cfg, rc)
	if err != nil {
		return nil, nil, err
	}
	mode := rc.mode
	fs := failover.New(rs,
		failover.WithMode(mode),
		failover.WithTimeout(cfg.Timeout),
		failover.WithAdaptiveTimeout(cfg.TimeoutMin, cfg.TimeoutMax),
		failover.WithBreaker(failover.BreakerSettings{
			MinCalls:    cfg.Breaker.MinCalls,
			Window:      cfg.Breaker.Window,
			FailureRate: float64(cfg.Breaker.FailureRate) / 100,
			Cooldown:    cfg.Breaker.Cooldown,
			Probes:      cfg.Breaker.Probes,
		}),
		failover.WithNodes(cfg.Nodes),
		// A breaker per shard of a sharded store, per master of a Cluster:
		// one node down sends only its own keys to the fail policy.
		failover.WithBreakerPerNode(func(r sluice.Request) string { return rs.NodeOf(r.Policy, r.Key) }),
		failover.WithLocal(memory.New(memoryOptions(cfg, log.With("store", "local"))...)),
		failover.WithNodeStateChange(func(node string, from, to failover.BreakerState) {
			level := slog.LevelWarn
			if to == failover.BreakerClosed {
				level = slog.LevelInfo
			}
			attrs := []any{"from", from.String(), "to", to.String(), "on_error", mode.String()}
			if node != "" {
				attrs = append(attrs, "node", node)
			}
			log.Log(context.Background(), level, "store circuit breaker", attrs...)
		}))
	stopModeLog := startModeLog(rs, log)
	if cfg.Lease == nil {
		return fs, func() { stopModeLog(); _ = rs.Close() }, nil
	}
	// Leases sit outside the fail policy, which then times and counts only
	// the calls that reach Redis: a node spends its lease while Redis is
	// down, and the fail policy decides once it needs a new one.
	opts := []lease.Option{lease.WithTTL(cfg.Lease.TTL), lease.WithMaxLease(cfg.Lease.MaxLease)}
	if cfg.Lease.Off {
		opts = append(opts, lease.WithOff())
	}
	ls := lease.New(fs, opts...)
	return ls, func() {
		stopModeLog()
		if err := ls.Close(); err != nil {
			log.Warn("store close: unused leased units stay consumed until their windows pass", "error", err)
		}
		_ = rs.Close()
	}, nil
}

// StoreWarnings lists what is valid in st, the store section in force, but
// admits more than the limits say: the local fail policy (the default) on
// Redis without store.nodes, under which every node falling back admits the
// whole limit, so N nodes admit N times it while Redis is down. serve logs
// the warnings and validate prints them.
func StoreWarnings(st config.Store) []string {
	scheme, _, _ := strings.Cut(st.URL, "://")
	switch strings.ToLower(scheme) {
	case "redis", "rediss", "unix":
	default:
		return nil
	}
	if st.Nodes > 0 {
		return nil
	}
	if mode, err := failover.ParseMode(st.OnError); st.OnError != "" && (err != nil || mode != failover.FailLocal) {
		return nil
	}
	return []string{"store.nodes is not set: while Redis is down, on_error: local (the default) lets every node admit " +
		"the whole limit on its own; set store.nodes to the number of Sluice nodes sharing this Redis (1 for one node), " +
		"or choose on_error: closed or open"}
}

// openRedis opens the Redis store cfg names: with a PerSecondURL, routed
// by PerSecond over the two (redisstore.OpenRouted), so that a request
// spanning both is still decided all or nothing (as across shards).
func openRedis(cfg config.Store, rc *redisSettings) (*redisstore.Store, error) {
	if cfg.PerSecondURL == "" {
		rs, err := redisstore.Open(cfg.URL, rc.opts...)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", RedactURL(cfg.URL), redact(err, cfg.URL))
		}
		return rs, nil
	}
	rs, err := redisstore.OpenRouted([]string{cfg.URL, cfg.PerSecondURL}, PerSecond, rc.opts...)
	if err != nil {
		return nil, fmt.Errorf("store %s, per second %s: %w", RedactURL(cfg.URL), RedactURL(cfg.PerSecondURL),
			redact(redact(err, cfg.URL), cfg.PerSecondURL))
	}
	return rs, nil
}

// PerSecond is the route of a store with a PerSecondURL: 1 (that Redis)
// for a limit of a period under a minute, as envoyproxy/ratelimit sends its
// limits of unit SECOND to REDIS_PERSECOND_URL, else 0 (the store's URL).
// The period is that of the limit a request is decided under, an override's
// or a plan's included.
func PerSecond(p *sluice.Policy) int {
	if p.Period < time.Minute {
		return 1
	}
	return 0
}

// CheckStore reports, without connecting, everything OpenStore would refuse
// in st, the store section in force for cfg (its URL possibly from the
// --store flag): the URL, the fail policy, and the password and TLS files,
// which it reads. Problems are a *config.Error located in the file and line
// that set the field; a bad URL that did not come from the file is reported
// against --store. serve and validate both call it, so that validate
// refuses exactly what serve would.
func CheckStore(cfg *config.Config, st config.Store) error {
	_, problems := readStore(st)
	var list []config.Problem
	if st.Lease == nil {
		list = append(list, policyLeasesUnused(cfg)...)
	}
	if len(problems) == 0 && len(list) == 0 {
		return nil
	}
	for _, p := range problems {
		if p.field == "store.url" && st.URL != cfg.Store.URL {
			list = append(list, config.Problem{File: "--store", Message: p.msg})
			continue
		}
		if p.field == "store.per_second_url" && st.PerSecondURL != cfg.Store.PerSecondURL {
			list = append(list, config.Problem{File: "--store-per-second", Message: p.msg})
			continue
		}
		list = append(list, cfg.StoreProblem(p.field, p.msg))
	}
	return &config.Error{Problems: list}
}

// storeProblem is a problem with one field of the store section.
type storeProblem struct{ field, msg string }

func (p *storeProblem) Error() string { return p.field + ": " + p.msg }

// redisSettings is what opening a Redis store takes, read and checked.
type redisSettings struct {
	mode     failover.Mode
	opts     []redisstore.Option
	password string      // from password_file, for other clients of the same Redis
	tls      *tls.Config // nil: none
}

// readStore checks cfg and reads the files it names, without connecting:
// the one place that decides what a store section may hold beyond its
// syntax. It returns nil settings for the memory store.
func readStore(cfg config.Store) (*redisSettings, []*storeProblem) {
	var problems []*storeProblem
	bad := func(field, format string, args ...any) {
		problems = append(problems, &storeProblem{field, fmt.Sprintf(format, args...)})
	}
	scheme, _, _ := strings.Cut(cfg.URL, "://")
	switch strings.ToLower(scheme) {
	case "", "memory":
		if cfg.Lease != nil {
			bad("store.lease", "leases share a Redis store between nodes; with the memory store every decision is local already: remove store.lease or set a redis:// url")
		}
		if cfg.PerSecondURL != "" {
			bad("store.per_second_url", "a second Redis for the per-second limits needs a Redis store: set store.url (or --store) to redis://…")
		}
		return nil, problems
	case "redis", "rediss", "unix":
	default:
		bad("store.url", "unknown scheme %q (want memory, redis, rediss or unix)", scheme)
		return nil, problems
	}
	checkRedisURL(bad, "store.url", cfg.URL)
	if cfg.PerSecondURL != "" {
		psScheme, _, _ := strings.Cut(cfg.PerSecondURL, "://")
		switch strings.ToLower(psScheme) {
		case "redis", "rediss", "unix":
			checkRedisURL(bad, "store.per_second_url", cfg.PerSecondURL)
		default:
			bad("store.per_second_url", "unknown scheme %q (want redis, rediss or unix)", psScheme)
		}
		if cfg.TLS != nil && !strings.EqualFold(psScheme, "rediss") {
			bad("store.per_second_url", "store.tls applies to both Redis servers, so this one must be rediss:// too, not %s://", strings.ToLower(psScheme))
		}
	}
	rc := &redisSettings{mode: failover.FailLocal}
	if cfg.OnError != "" {
		mode, err := failover.ParseMode(cfg.OnError)
		if err != nil {
			bad("store.on_error", "%v", err)
		}
		rc.mode = mode
	}
	// The fail-over Store times each call; Redis' own bound is only a
	// backstop above it.
	backstop := cfg.Timeout
	if backstop == 0 {
		backstop = 2 * max(cfg.TimeoutMax, cfg.TimeoutMin, failover.DefaultMaxTimeout)
	}
	rc.opts = []redisstore.Option{redisstore.WithLazyConnect(), redisstore.WithTimeout(backstop)}
	if cfg.KeyPrefix != "" {
		if msg := config.CheckKeyPrefix(cfg.KeyPrefix); msg != "" {
			bad("store.key_prefix", "%s", msg)
		}
		rc.opts = append(rc.opts, redisstore.WithPrefix(cfg.KeyPrefix+redisstore.DefaultPrefix))
	}
	if cfg.PasswordFile != "" {
		b, err := os.ReadFile(cfg.PasswordFile)
		if err != nil {
			bad("store.password_file", "%v", err)
		} else {
			rc.password = strings.TrimRight(string(b), "\r\n")
			rc.opts = append(rc.opts, redisstore.WithPassword(rc.password))
		}
	}
	if cfg.TLS != nil {
		if !strings.EqualFold(scheme, "rediss") {
			// rueidis would turn TLS on for any URL given a TLS config; a
			// redis:// URL with a tls section is a mistake either way.
			bad("store.tls", "set, but the store URL is %s://, not rediss://", strings.ToLower(scheme))
		}
		tc, field, err := tlsConfig(cfg.TLS)
		if err != nil {
			bad(field, "%v", err)
		}
		rc.tls = tc
		rc.opts = append(rc.opts, redisstore.WithTLSConfig(tc))
	}
	return rc, problems
}

// checkRedisURL reports, as field's problem, a Redis URL that rueidis or
// redisstore would refuse.
func checkRedisURL(bad func(field, format string, args ...any), field, raw string) {
	if _, err := rueidis.ParseURL(raw); err != nil {
		bad(field, "%v", redact(err, raw))
	} else if _, err := redisstore.ShardURLs(raw); err != nil {
		bad(field, "%v", redact(err, raw))
	}
}

// memoryOptions bounds the memory store (or the local fallback) as configured
// (unset bounds keep memory's defaults) and has it log on log while it is
// full.
func memoryOptions(cfg config.Store, log *slog.Logger) []memory.Option {
	opts := []memory.Option{memory.WithLogger(log)}
	if cfg.MaxKeys > 0 {
		opts = append(opts, memory.WithMaxKeys(cfg.MaxKeys))
	}
	if cfg.MaxBytes > 0 {
		opts = append(opts, memory.WithMaxBytes(cfg.MaxBytes))
	}
	return opts
}

// tlsConfig builds the TLS configuration of the store.tls section; on error
// it names the field at fault.
func tlsConfig(c *config.TLS) (tc *tls.Config, field string, err error) {
	tc = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, InsecureSkipVerify: c.InsecureSkipVerify} //nolint:gosec // an explicit, documented opt-in
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, "store.tls.ca_file", err
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, "store.tls.ca_file", fmt.Errorf("%s holds no PEM certificate", c.CAFile)
		}
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, "store.tls.cert_file", fmt.Errorf("cannot load it with key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, "", nil
}

// RedactURL returns raw with its password hidden, for logs and errors.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	q := u.Query()
	if shards := q["shard"]; len(shards) > 0 { // a sharded store: each may hold a password
		for i, s := range shards {
			shards[i] = RedactURL(s)
		}
		u.RawQuery = q.Encode()
		raw = u.String()
	}
	if u.User == nil {
		return raw
	}
	return u.Redacted()
}

// redact removes the passwords of the URL (and of its shards) from err's
// text, in case a library quoted the URL.
func redact(err error, raw string) error {
	u, perr := url.Parse(raw)
	if perr != nil {
		return err
	}
	msg := err.Error()
	for _, s := range u.Query()["shard"] {
		msg = redact(errors.New(msg), s).Error()
	}
	if u.User != nil {
		if pass, ok := u.User.Password(); ok && pass != "" {
			msg = strings.ReplaceAll(msg, pass, "xxxxx")
		}
	}
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}
