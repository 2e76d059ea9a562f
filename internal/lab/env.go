package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/redisstore"
)

// env is what a scenario runs against: the options and, on Redis, one client
// shared by every store and counter of the run, under a prefix no other run
// uses.
type env struct {
	opts   Options
	redis  rueidis.Client // nil: memory
	prefix string
}

func newEnv(ctx context.Context, o Options) (*env, error) {
	e := &env{opts: o}
	switch {
	case o.Store == "memory://" || o.Store == "memory":
		return e, nil
	case strings.HasPrefix(o.Store, "redis://"), strings.HasPrefix(o.Store, "rediss://"), strings.HasPrefix(o.Store, "unix://"):
	default:
		return nil, fmt.Errorf("lab: store %q: want memory:// or a redis:// URL", o.Store)
	}
	ro, err := rueidis.ParseURL(o.Store)
	if err != nil {
		return nil, fmt.Errorf("lab: store: %w", err)
	}
	ro.DisableCache = true
	if e.redis, err = rueidis.NewClient(ro); err != nil {
		return nil, fmt.Errorf("lab: store: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	e.prefix = "sluice-lab:" + hex.EncodeToString(b[:]) + ":"
	if err := e.redis.Do(ctx, e.redis.B().Ping().Build()).Error(); err != nil {
		e.redis.Close()
		return nil, fmt.Errorf("lab: store: %w", err)
	}
	return e, nil
}

func (e *env) isRedis() bool { return e.redis != nil }

// close deletes the run's keys (they also carry TTLs, so a crash leaves
// nothing for long) and closes the client.
func (e *env) close() {
	if e.redis == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var cursor uint64
	for {
		entry, err := e.redis.Do(ctx, e.redis.B().Scan().Cursor(cursor).Match(e.prefix+"*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			break
		}
		if len(entry.Elements) > 0 {
			e.redis.Do(ctx, e.redis.B().Del().Key(entry.Elements...).Build())
		}
		if cursor = entry.Cursor; cursor == 0 {
			break
		}
	}
	e.redis.Close()
}

// store returns a Sluice store for the run. On memory it reads clock (the
// system clock when nil). On Redis it decides at clock's time when clock is
// set — the virtual-time scenarios, to stay deterministic — and at Redis
// server time when it is nil. name separates the state of different parts of
// a run.
func (e *env) store(name string, clock sluice.Clock) sluice.Store {
	if e.redis == nil {
		if clock == nil {
			return memory.New()
		}
		return memory.New(memory.WithClock(clock))
	}
	opts := []redisstore.Option{redisstore.WithPrefix(e.prefix + name + ":"), redisstore.WithTimeout(5 * time.Second)}
	if clock != nil {
		opts = append(opts, redisstore.WithClock(clock))
	}
	return redisstore.New(e.redis, opts...)
}

// counter returns the plain shared counters the naive variants build on:
// real GET/SET/INCRBY on Redis, a map behind a mutex in memory.
func (e *env) counter(name string) counter {
	if e.redis == nil {
		return &memCounter{m: make(map[string]int64)}
	}
	return &redisCounter{c: e.redis, prefix: e.prefix + name + ":"}
}

// counter is a plain shared integer per key. Each operation is atomic on its
// own, but nothing makes a read and a later write one step: that gap is what
// the naive variants fall into.
type counter interface {
	get(ctx context.Context, key string) (int64, error)
	set(ctx context.Context, key string, v int64) error
	incrBy(ctx context.Context, key string, n int64) (int64, error)
}

// memCounter is the in-process counter: one map, locked per operation.
type memCounter struct {
	mu sync.Mutex
	m  map[string]int64
}

func (c *memCounter) get(_ context.Context, key string) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key], nil
}

func (c *memCounter) set(_ context.Context, key string, v int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[key] = v
	return nil
}

func (c *memCounter) incrBy(_ context.Context, key string, n int64) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[key] += n
	return c.m[key], nil
}

// redisCounter is the same on Redis: one command per operation, each key
// kept for ten minutes at most.
type redisCounter struct {
	c      rueidis.Client
	prefix string
}

const counterTTL = 10 * time.Minute

func (c *redisCounter) get(ctx context.Context, key string) (int64, error) {
	v, err := c.c.Do(ctx, c.c.B().Get().Key(c.prefix+key).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	return v, err
}

func (c *redisCounter) set(ctx context.Context, key string, v int64) error {
	return c.c.Do(ctx, c.c.B().Set().Key(c.prefix+key).Value(fmt.Sprint(v)).Px(counterTTL).Build()).Error()
}

func (c *redisCounter) incrBy(ctx context.Context, key string, n int64) (int64, error) {
	res := c.c.DoMulti(ctx,
		c.c.B().Incrby().Key(c.prefix+key).Increment(n).Build(),
		c.c.B().Pexpire().Key(c.prefix+key).Milliseconds(counterTTL.Milliseconds()).Build())
	if err := res[1].Error(); err != nil {
		return 0, err
	}
	return res[0].AsInt64()
}

// vclock is the virtual clock: it reads whatever the lab last set, so a
// scenario moves time itself and never sleeps.
type vclock struct{ us atomic.Int64 }

func newVClock(us int64) *vclock {
	c := &vclock{}
	c.us.Store(us)
	return c
}

// Now implements sluice.Clock.
func (c *vclock) Now() time.Time { return time.UnixMicro(c.us.Load()) }

func (c *vclock) set(us int64) { c.us.Store(us) }

// virtualLead is how far ahead of the wall clock virtual time starts. On
// Redis the lab passes its virtual clock to the store (redisstore.WithClock),
// and a key then expires on the server's clock at the virtual instant its
// state is initial again, read as a Unix time. Starting a day ahead keeps
// every key for the whole run however slowly the machine runs it (a virtual
// start in the past would let keys expire in real time before their virtual
// reset, forget admissions and over-admit), and still lets the keys of a run
// that died before deleting them expire within about a day.
const virtualLead = 24 * time.Hour

// virtualStart is where virtual time begins: virtualLead after the wall
// clock, rounded up to a whole number of periods so windows start with the
// run. Every scenario works on offsets from it, so the numbers do not depend
// on when a run starts.
func virtualStart(period int64) int64 {
	t0 := time.Now().Add(virtualLead).UnixMicro()
	return (t0 + period - 1) / period * period
}

func micros(d time.Duration) int64 { return int64(d / time.Microsecond) }

// decide asks st to admit one unit of key under p.
func decide(ctx context.Context, st sluice.Store, p *sluice.Policy, key string) (bool, error) {
	res, err := st.Decide(ctx, sluice.Request{Policy: p, Key: key, Cost: 1})
	return res.Allowed, err
}

// policy returns a validated policy of the run's limit and period.
func (e *env) policy(name string, alg sluice.Algorithm) (*sluice.Policy, error) {
	p := &sluice.Policy{Name: name, Algorithm: alg, Limit: e.opts.Limit, Period: e.opts.Period}
	return p, p.Validate()
}
