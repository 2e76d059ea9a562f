package failover_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/redisstore"
)

// Settings of the chaos tests. The machine running them is shared and
// loaded, so the margins are generous: what the tests tell apart is a bounded
// wait (timeout + margin) from a hang (seconds, or the go test timeout).
const (
	// chaosTimeout is the fail-over Store's per-call timeout: five times the
	// production default, so that a healthy Redis behind -race on two busy
	// cores rarely misses it.
	chaosTimeout = 50 * time.Millisecond
	// chaosMargin is what a call may take beyond chaosTimeout: scheduling
	// delays, the fail policy's own work, the race detector. On two cores
	// shared with other test binaries and CPU burners a call with Redis down
	// was seen to take 388 ms without a stall the meter could see, so the
	// margin is a second: still far below a hang (a dial timeout is seconds).
	chaosMargin = time.Second
	// The breaker judges the last chaosFailures calls (it opens when half of
	// them failed) and probes every chaosCooldown: the cool-down must stay
	// well below chaosRecovery, or an open breaker alone would miss it.
	chaosFailures = 3
	chaosCooldown = 250 * time.Millisecond
	// chaosRecovery is how soon after Redis is back (Restart or Resume
	// returned) decisions must be Redis' again: the requirement.
	chaosRecovery = 2 * time.Second
	// chaosWorkers goroutines decide in a loop during every fault.
	chaosWorkers = 16
)

// chaosPolicy allows 20 per hour: during a test (seconds) GCRA frees no
// further unit, so a store that admits more than 20 on one key ignored the
// limit.
var chaosPolicy = &sluice.Policy{Name: "chaos", Algorithm: sluice.GCRA, Limit: 20, Period: time.Hour}

var chaosPrefixes atomic.Int64

// openRedis opens a Store on url for the length of the test, with a key prefix
// no other store in this process uses. Its own per-call timeout is far above
// the fail-over Store's, so the latter is the one that bounds each call.
func openRedis(t *testing.T, url string, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	opts = append([]redisstore.Option{
		redisstore.WithPrefix(fmt.Sprintf("chaos%d:", chaosPrefixes.Add(1))),
		redisstore.WithTimeout(5 * time.Second),
	}, opts...)
	rs, err := redisstore.Open(url, opts...)
	if err != nil {
		t.Fatalf("redisstore.Open(%s): %v", url, err)
	}
	t.Cleanup(func() { _ = rs.Close() })
	return rs
}

// newChaosStore wraps primary with the chaos settings and mode, logging the
// breaker's transitions into bl.
func newChaosStore(primary sluice.Store, mode failover.Mode, bl *breakerLog, opts ...failover.Option) *failover.Store {
	opts = append([]failover.Option{
		failover.WithMode(mode),
		failover.WithTimeout(chaosTimeout),
		failover.WithBreaker(failover.BreakerSettings{MinCalls: chaosFailures, Cooldown: chaosCooldown}),
		failover.WithStateChange(bl.record),
	}, opts...)
	return failover.New(primary, opts...)
}

// breakerLog records the breaker's transitions with their times.
type breakerLog struct {
	mu     sync.Mutex
	events []breakerEvent
}

type breakerEvent struct {
	at       time.Time
	from, to failover.BreakerState
}

func (b *breakerLog) record(from, to failover.BreakerState) {
	b.mu.Lock()
	b.events = append(b.events, breakerEvent{time.Now(), from, to})
	b.mu.Unlock()
}

// opened returns when the breaker first opened at or after from, or the zero
// time if it did not.
func (b *breakerLog) opened(from time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.events {
		if e.to == failover.BreakerOpen && !e.at.Before(from) {
			return e.at
		}
	}
	return time.Time{}
}

// since describes the transitions at or after from.
func (b *breakerLog) since(from time.Time) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var sb strings.Builder
	for _, e := range b.events {
		if !e.at.Before(from) {
			fmt.Fprintf(&sb, " +%v:%v", e.at.Sub(from).Round(time.Millisecond), e.to)
		}
	}
	return sb.String()
}

func (b *breakerLog) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.events)
}

// waitDecided decides key on s until Redis, not the fail policy, answers, and
// returns that result; it fails the test if that does not happen at all.
func waitDecided(t *testing.T, s sluice.Store, key string) sluice.Result {
	t.Helper()
	var r sluice.Result
	testwait.UntilSaw(t, "a decision by Redis on "+key, func() (bool, string) {
		var err error
		r, err = s.Decide(context.Background(), sluice.Request{Policy: chaosPolicy, Key: key, Cost: 1})
		return err == nil && !r.Degraded, fmt.Sprintf("%+v, %v", r, err)
	})
	return r
}

// chaosCall is one Decide made by the load.
type chaosCall struct {
	start, end time.Time
	worker     int
	key        int // index into the load's keys
	res        sluice.Result
	err        error
}

func (c chaosCall) latency() time.Duration { return c.end.Sub(c.start) }

// byRedis reports whether Redis decided the call: no error, not degraded.
func (c chaosCall) byRedis() bool { return c.err == nil && !c.res.Degraded }
