package service

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/redisstore"
)

// OpenStore opens the store a URL names:
//
//	memory:// (or "")                the embedded memory store: one process, no
//	                                 sharing between nodes
//	redis://[user:pass@]host:port    Redis, a Cluster (add ?addr=host:port for
//	rediss://…  unix://…             more seed nodes) or Sentinel; see redisstore.Open
//
// timeout bounds each store call (0: the store's default). close releases the
// store's connections.
func OpenStore(rawURL string, timeout time.Duration) (store sluice.Store, close func(), err error) {
	scheme, _, _ := strings.Cut(rawURL, "://")
	switch strings.ToLower(scheme) {
	case "", "memory":
		return memory.New(), func() {}, nil
	case "redis", "rediss", "unix":
		var opts []redisstore.Option
		if timeout > 0 {
			opts = append(opts, redisstore.WithTimeout(timeout))
		}
		s, err := redisstore.Open(rawURL, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("store %s: %w", RedactURL(rawURL), err)
		}
		return s, s.Close, nil
	default:
		return nil, nil, fmt.Errorf("store %s: unknown scheme %q (want memory, redis, rediss or unix)", RedactURL(rawURL), scheme)
	}
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
