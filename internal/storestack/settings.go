package storestack

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/redisstore"
)

// Warnings lists what is valid in st, the store section in force, but
// admits more than the limits say: the local fail policy (the default) on
// Redis without store.nodes, under which every node falling back admits the
// whole limit, so N nodes admit N times it while Redis is down. serve logs
// the warnings and validate prints them.
func Warnings(st config.Store) []string {
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

// Check reports, without connecting, everything Open would refuse
// in st, the store section in force for cfg (its URL possibly from the
// --store flag): the URL, the fail policy, and the password and TLS files,
// which it reads. Problems are a *config.Error located in the file and line
// that set the field; a bad URL that did not come from the file is reported
// against --store. serve and validate both call it, so that validate
// refuses exactly what serve would.
func Check(cfg *config.Config, st config.Store) error {
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

// RedisClient returns the client options of another client of the store's
// Redis (the overrides): its URL's, with the password of password_file and
// the TLS of the tls section; redis is false for the memory store. Check
// reports its errors with their fields.
func RedisClient(cfg config.Store) (opt rueidis.ClientOption, redis bool, err error) {
	rc, problems := readStore(cfg)
	if len(problems) > 0 {
		return opt, false, problems[0]
	}
	if rc == nil {
		return opt, false, nil
	}
	if opt, err = rueidis.ParseURL(cfg.URL); err != nil {
		return opt, false, err
	}
	if rc.password != "" {
		opt.Password = rc.password
	}
	if rc.tls != nil {
		opt.TLSConfig = rc.tls
	}
	return opt, true, nil
}

// checkRedisURL reports, as field's problem, a Redis URL that rueidis or
// redisstore would refuse.
func checkRedisURL(bad func(field, format string, args ...any), field, raw string) {
	if _, err := rueidis.ParseURL(raw); err != nil {
		bad(field, "%v", Redact(err, raw))
	} else if _, err := redisstore.ShardURLs(raw); err != nil {
		bad(field, "%v", Redact(err, raw))
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

// policyLeasesUnused reports the policies with a lease section while the
// store has none: leases need the lease layer that store.lease turns on.
func policyLeasesUnused(cfg *config.Config) []config.Problem {
	var list []config.Problem
	for _, p := range cfg.Policies {
		if p.Lease != nil && !p.Lease.Off {
			list = append(list, config.Problem{File: p.File, Line: p.Line, Field: "lease",
				Message: "policy " + p.Name + " has a lease section, but the store has none: set store.lease (off leases only the policies that ask) with a redis:// url"})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].File != list[j].File {
			return list[i].File < list[j].File
		}
		return list[i].Line < list[j].Line
	})
	return list
}
