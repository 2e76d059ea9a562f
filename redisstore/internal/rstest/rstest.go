// Package rstest holds the tests every Runner of package redisstore passes —
// the rueidis one and the go-redis one — against a real Redis or Redis
// Cluster: the conformance suite, a differential test against sluice.Decide,
// and reloading the Lua after SCRIPT FLUSH and FUNCTION FLUSH.
package rstest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/storetest"
)

// Target is a Redis deployment reached through one client library.
type Target struct {
	// New returns a Store on the target whose keys start with a prefix no
	// other call uses (see Prefix), so tests never share state.
	New func(t *testing.T, opts ...redisstore.Option) *redisstore.Store
	// ExpireTime returns PEXPIRETIME key: the Unix ms through which the key
	// lives, -2 when it does not exist, -1 when it never expires.
	ExpireTime func(t *testing.T, key string) int64
	// FlushScripts runs SCRIPT FLUSH and FUNCTION FLUSH on every node: the
	// server forgets the store's Lua, as after a restart with no data.
	FlushScripts func(t *testing.T)
}

// Defaults are the options every test store starts from (a caller's own come
// after and win): a prefix no other store uses, and a per-call timeout far
// above the production default, because these tests check decisions, not
// latency, and -race on two shared cores with a Cluster can take well over
// 100ms for one call. Timeouts are tested where they are the point.
func Defaults() []redisstore.Option {
	return []redisstore.Option{redisstore.WithPrefix(Prefix()), redisstore.WithTimeout(5 * time.Second)}
}

var prefixes atomic.Int64

// Prefix returns a key prefix unique in this process.
func Prefix() string { return fmt.Sprintf("t%d:", prefixes.Add(1)) }

// Conformance runs the storetest suite, each case on a fresh prefix, with a
// TTL read from the key's PEXPIRETIME.
func Conformance(t *testing.T, tg Target) {
	storetest.Run(t, func(t *testing.T, clock sluice.Clock) storetest.Harness {
		// storetest.Epoch lies in the future, so Redis' real-time expiry never
		// removes state the suite's clock still holds live.
		s := tg.New(t, redisstore.WithClock(clock))
		return storetest.Harness{Store: s, TTL: TTL(t, tg, s, clock)}
	})
}

// TTL returns the harness's TTL function: the time, on clock, until the key
// holding (policy, key) expires (PEXPIREAT w keeps it through millisecond w).
func TTL(t *testing.T, tg Target, s *redisstore.Store, clock sluice.Clock) func(policy, key string) (time.Duration, bool) {
	return func(policy, key string) (time.Duration, bool) {
		for _, a := range append(sluice.Algorithms[:len(sluice.Algorithms):len(sluice.Algorithms)], sluice.Concurrency) {
			k := s.Key(&sluice.Policy{Name: policy, Algorithm: a}, key)
			switch when := tg.ExpireTime(t, k); when {
			case -2:
				continue
			case -1:
				t.Errorf("key %q has no expiry", k)
				return 0, true
			default:
				return time.Duration((when+1)*1000-clock.Now().UnixMicro()) * time.Microsecond, true
			}
		}
		return 0, false
	}
}
