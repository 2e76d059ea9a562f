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

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/failover"
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
// policy, timeout and circuit breaker; breaker transitions are logged on log
// (nil: slog.Default()). close releases the store's connections.
func OpenStore(cfg config.Store, log *slog.Logger) (store sluice.Store, close func(), err error) {
	if log == nil {
		log = slog.Default()
	}
	scheme, _, _ := strings.Cut(cfg.URL, "://")
	switch strings.ToLower(scheme) {
	case "", "memory":
		return memory.New(memoryOptions(cfg)...), func() {}, nil
	case "redis", "rediss", "unix":
	default:
		return nil, nil, fmt.Errorf("store %s: unknown scheme %q (want memory, redis, rediss or unix)", RedactURL(cfg.URL), scheme)
	}
	mode := failover.FailOpen
	if cfg.OnError != "" {
		if mode, err = failover.ParseMode(cfg.OnError); err != nil {
			return nil, nil, err
		}
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = failover.DefaultTimeout
	}
	opts := []redisstore.Option{redisstore.WithLazyConnect(), redisstore.WithTimeout(timeout)}
	if cfg.PasswordFile != "" {
		b, err := os.ReadFile(cfg.PasswordFile)
		if err != nil {
			return nil, nil, fmt.Errorf("store.password_file: %w", err)
		}
		opts = append(opts, redisstore.WithPassword(strings.TrimRight(string(b), "\r\n")))
	}
	if cfg.TLS != nil {
		if !strings.EqualFold(scheme, "rediss") {
			// rueidis would turn TLS on for any URL given a TLS config; a
			// redis:// URL with a tls section is a mistake either way.
			return nil, nil, fmt.Errorf("store.tls is set but the store URL is %s://, not rediss://", strings.ToLower(scheme))
		}
		tc, err := tlsConfig(cfg.TLS)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, redisstore.WithTLSConfig(tc))
	}
	rs, err := redisstore.Open(cfg.URL, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("store %s: %w", RedactURL(cfg.URL), redact(err, cfg.URL))
	}
	fs := failover.New(rs,
		failover.WithMode(mode),
		failover.WithTimeout(timeout),
		failover.WithBreaker(cfg.Breaker.Failures, cfg.Breaker.Cooldown),
		failover.WithNodes(cfg.Nodes),
		failover.WithLocal(memory.New(memoryOptions(cfg)...)),
		failover.WithStateChange(func(from, to failover.BreakerState) {
			level := slog.LevelWarn
			if to == failover.BreakerClosed {
				level = slog.LevelInfo
			}
			log.Log(context.Background(), level, "store circuit breaker", "from", from.String(), "to", to.String(), "on_error", mode.String())
		}))
	return fs, rs.Close, nil
}

// memoryOptions bounds the memory store (or the local fallback) as configured;
// unset bounds keep memory's defaults.
func memoryOptions(cfg config.Store) []memory.Option {
	var opts []memory.Option
	if cfg.MaxKeys > 0 {
		opts = append(opts, memory.WithMaxKeys(cfg.MaxKeys))
	}
	if cfg.MaxBytes > 0 {
		opts = append(opts, memory.WithMaxBytes(cfg.MaxBytes))
	}
	return opts
}

// tlsConfig builds the TLS configuration of the store.tls section.
func tlsConfig(c *config.TLS) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, InsecureSkipVerify: c.InsecureSkipVerify} //nolint:gosec // an explicit, documented opt-in
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("store.tls.ca_file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("store.tls.ca_file: %s holds no PEM certificate", c.CAFile)
		}
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("store.tls.cert_file, key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// RedactURL returns raw with its password hidden, for logs and errors.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User == nil {
		return raw
	}
	return u.Redacted()
}

// redact removes the URL's password from err's text, in case a library
// quoted the URL.
func redact(err error, raw string) error {
	u, perr := url.Parse(raw)
	if perr != nil || u.User == nil {
		return err
	}
	pass, ok := u.User.Password()
	if !ok || pass == "" || !strings.Contains(err.Error(), pass) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), pass, "xxxxx"))
}
