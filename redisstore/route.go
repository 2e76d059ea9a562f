package redisstore

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
)

// Routes: keys placed by policy on several Redis servers.
//
// envoyproxy/ratelimit can keep its per-second limits on a Redis of their
// own (REDIS_PERSECOND), away from the hot keys' neighbours. OpenRouted does
// the same for any split by policy: each route is a Redis (or Cluster,
// Sentinel, or sharded store) of its own, and route(policy) picks it. The
// Runner is a ShardedRunner whose shards are the routes, placing a key by
// its prefix instead of its hash, so everything shards do, routes do:
// all-or-nothing sets over several routes take the cross-slot path
// (crossslot.go), a breaker per route (NodeOf names them), batching per
// route.
//
// A key knows its route from its prefix: route 0's keys are the store's
// usual ones, prefix + "{policy:key}:code"; route i's carry "r<i>:" after
// the prefix. A prefix is followed by '{' in every key of route 0, so no key
// of route 0 can start with another route's prefix.

// OpenRouted connects to the Redis servers urls name (each as Open takes
// one: a Redis, a Cluster, Sentinel, or independent shards) and returns a
// Store that keeps the keys of policy p on urls[route(p)]; a route out of
// range is route 0. route must give a policy the same route every time.
// Open's options apply to every route (WithPassword included: it replaces
// the password of each URL). The routes must be distinct servers.
func OpenRouted(urls []string, route func(*sluice.Policy) int, opts ...Option) (*Store, error) {
	if len(urls) < 2 || route == nil {
		return nil, errors.New("redisstore: OpenRouted: needs two URLs or more and a route")
	}
	cf := newConfig(opts)
	prefixes := make([]string, len(urls))
	shards := make([]Shard, len(urls))
	closers := make([]func(), 0, len(urls))
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	seen := map[string]int{}
	for i, u := range urls {
		name, err := routeName(u)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("redisstore: OpenRouted: route %d: %w", i, err)
		}
		if j, dup := seen[name]; dup {
			closeAll()
			return nil, fmt.Errorf("redisstore: OpenRouted: routes %d and %d are both %s", j, i, name)
		}
		seen[name] = i
		r, closeRunner, err := openURL(u, cf)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("redisstore: OpenRouted: route %d: %w", i, err)
		}
		closers = append(closers, closeRunner)
		prefixes[i] = routePrefix(cf.prefix, i)
		shards[i] = Shard{Name: name, Runner: r}
	}
	sr, err := NewShardedRunner(shards...)
	if err != nil {
		closeAll()
		return nil, err
	}
	sr.prefixes = prefixes
	s := NewWithRunner(sr, opts...)
	s.close, s.route, s.prefixes = closeAll, route, prefixes
	return s, nil
}

// Routes returns how many Redis servers the store places policies on: 1
// unless it was opened by OpenRouted.
func (s *Store) Routes() int { return max(1, len(s.prefixes)) }

// RouteOf returns the route, 0 to Routes()-1, that holds p's keys.
func (s *Store) RouteOf(p *sluice.Policy) int {
	if s.route == nil {
		return 0
	}
	if i := s.route(p); i > 0 && i < len(s.prefixes) {
		return i
	}
	return 0
}

// prefixOf is the prefix of p's keys: its route's.
func (s *Store) prefixOf(p *sluice.Policy) string {
	if s.route == nil {
		return s.prefix
	}
	return s.prefixes[s.RouteOf(p)]
}

// routePrefix is the prefix of route i's keys.
func routePrefix(prefix string, i int) string {
	if i == 0 {
		return prefix
	}
	return prefix + "r" + strconv.Itoa(i) + ":"
}

// routeIn returns the route of the key among prefixes, a routed store's: the
// last one, from the second on, the key starts with; else 0.
func (k keyRef) routeIn(prefixes []string) int {
	head := k.full
	if k.p != nil {
		head = k.prefix
	}
	for i := len(prefixes) - 1; i > 0; i-- {
		if strings.HasPrefix(head, prefixes[i]) {
			return i
		}
	}
	return 0
}

// routeName names a route for breakers and logs: the address of its URL
// (the first, for a Cluster's seeds or a sharded store), socket path and
// database, without scheme or credentials.
func routeName(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	name := u.Host + u.Path
	if db := u.Query().Get("db"); db != "" {
		name += "?db=" + db
	}
	if name == "" {
		return "", errors.New("the URL names no server")
	}
	return name, nil
}
