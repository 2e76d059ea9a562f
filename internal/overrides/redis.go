package overrides

import (
	"context"
	"crypto/rand"
	_ "embed" // the Lua sources
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/reconnect"
)

var (
	//go:embed lua/change.lua
	changeLua string
	//go:embed lua/sync.lua
	syncLua string

	changeScript = rueidis.NewLuaScript(changeLua)
	syncScript   = rueidis.NewLuaScript(syncLua)
)

// DefaultRedisPrefix starts every Redis key of the overrides. The hash tag
// keeps them all on one Cluster slot, so each change is one atomic script.
const DefaultRedisPrefix = "sluice:{overrides}:"

const (
	// callTimeout bounds each call to Redis.
	callTimeout = 2 * time.Second
	// logLen is how many changes the change log keeps: a node further
	// behind reads every override instead of what changed.
	logLen = 1000
	// purgeMax is how many expired overrides a change drops, at most: each
	// change stores at most one, so they cannot pile up while changes are
	// made, and no change pays for all of them at once.
	purgeMax = 16
)

// redisBackend keeps the overrides in Redis (see lua/change.lua for the
// keys): each change is one script of O(log n) work, and a node that is up
// to date checks it is with a read of three hash fields.
type redisBackend struct {
	opt     rueidis.ClientOption
	prefix  string
	channel string
	// The bounds and sizes: MaxPerPolicy, MaxTotal, logLen and purgeMax
	// but in tests.
	maxPerPolicy, maxTotal, logLen, purgeMax int

	mu     sync.Mutex
	client rueidis.Client // nil until connected
}

// NewRedis returns a Store keeping the overrides in the Redis that opt
// describes, shared by every node using it. It connects when first needed,
// so it starts while Redis is down; Run keeps it current.
func NewRedis(opt rueidis.ClientOption, opts ...Option) *Store {
	opt.DisableCache = true
	opt.DisableRetry = true // a call fails within callTimeout; Run tries again
	// One connection: changes and checks are few, and a connection Redis
	// closed is met by one call, not by one on each of several.
	opt.PipelineMultiplex = -1
	if opt.Dialer.Timeout == 0 {
		// A Redis that accepts but does not answer (stopped) holds a dial,
		// and with it every call waiting for the connection, this long.
		opt.Dialer.Timeout = callTimeout
	}
	b := &redisBackend{opt: opt, maxPerPolicy: MaxPerPolicy, maxTotal: MaxTotal, logLen: logLen, purgeMax: purgeMax}
	s := newStore(b, opts)
	b.prefix, b.channel = s.prefix+DefaultRedisPrefix, s.prefix+"sluice:overrides"
	return s
}

// Close closes the Store's connections, if it has any.
func (s *Store) Close() {
	if r, ok := s.b.(*redisBackend); ok {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.client != nil {
			r.client.Close()
			r.client = nil
		}
	}
}

func (r *redisBackend) get() (rueidis.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		return r.client, nil
	}
	c, err := rueidis.NewClient(r.opt)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	r.client = c
	return c, nil
}

// The keys, in the order the scripts take them.
func (r *redisBackend) hashKey() string { return r.prefix + "overrides" }
func (r *redisBackend) logKey() string  { return r.prefix + "log" }
func (r *redisBackend) changeKeys() []string {
	return []string{r.hashKey(), r.prefix + "index", r.prefix + "expiries", r.logKey()}
}

// newID returns a random change id: 16 characters, as the scripts expect.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// change runs change.lua and returns what it returned.
func (r *redisBackend) change(ctx context.Context, op, policy, target, value string, now time.Time) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c, err := r.get()
	if err != nil {
		return 0, err
	}
	n, err := changeScript.Exec(ctx, c, r.changeKeys(), []string{op, policy, target, value, micros(now), newID(),
		strconv.Itoa(r.maxPerPolicy), strconv.Itoa(r.maxTotal), strconv.Itoa(r.purgeMax), strconv.Itoa(r.logLen), r.channel}).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return n, nil
}

func (r *redisBackend) put(ctx context.Context, o Override, now time.Time) error {
	n, err := r.change(ctx, "set", o.Policy, o.Target(), encodeValue(&o), now)
	switch {
	case err != nil:
		return err
	case n == -1:
		return errFull(true, r.maxPerPolicy)
	case n == -2:
		return errFull(false, r.maxTotal)
	}
	return nil
}

func (r *redisBackend) remove(ctx context.Context, policy, target string, now time.Time) (bool, error) {
	n, err := r.change(ctx, "del", policy, target, "", now)
	return n > 0, err
}

// sync asks Redis what changed since from. A call that fails on the
// connection is made once more at once: it only reads, and the first call
// after Redis restarted meets the connection it closed.
func (r *redisBackend) sync(ctx context.Context, from position) (delta, error) {
	d, err := r.syncOnce(ctx, from)
	if _, isReply := rueidis.IsRedisErr(err); err != nil && !isReply && ctx.Err() == nil {
		d, err = r.syncOnce(ctx, from)
	}
	return d, err
}

func (r *redisBackend) syncOnce(ctx context.Context, from position) (delta, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c, err := r.get()
	if err != nil {
		return delta{}, err
	}
	vals, err := syncScript.Exec(ctx, c, []string{r.hashKey(), r.logKey()},
		[]string{from.epoch, strconv.FormatInt(from.version, 10), from.head, strconv.Itoa(r.logLen - 1)}).ToArray()
	if err != nil {
		return delta{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	d, same, err := decodeSync(vals)
	switch {
	case err != nil:
		return delta{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case same:
		return delta{to: from}, nil
	}
	return d, nil
}

// decodeSync reads sync.lua's reply; same when nothing changed. Entries
// this version cannot read are left out of a full reply and read as removed
// in a delta.
func decodeSync(vals []rueidis.RedisMessage) (d delta, same bool, err error) {
	if len(vals) == 0 {
		return delta{}, false, errors.New("an empty reply")
	}
	kind, err := vals[0].ToString()
	if err != nil {
		return delta{}, false, err
	}
	if kind == "same" {
		return delta{}, true, nil
	}
	if (kind != "full" && kind != "diverged" && kind != "delta") || len(vals) < 4 || len(vals)%2 != 0 {
		return delta{}, false, fmt.Errorf("a reply of kind %q and %d elements", kind, len(vals))
	}
	d.full, d.diverged = kind != "delta", kind == "diverged"
	d.to.epoch, _ = vals[1].ToString()
	if d.to.version, err = vals[2].AsInt64(); err != nil {
		return delta{}, false, err
	}
	d.to.head, _ = vals[3].ToString()
	for i := 4; i+1 < len(vals); i += 2 {
		field, _ := vals[i].ToString()
		value, err := vals[i+1].ToString()
		o, ok := decodeEntry(field, value)
		switch {
		case ok && err == nil:
			d.changes = append(d.changes, change{o: o})
		case !d.full:
			if o, ok := decodeField(field); ok {
				d.changes = append(d.changes, change{o: o, removed: true})
			}
		}
	}
	return d, false, nil
}

// subscribe calls notify for every change published, until ctx ends; a
// lost subscription is made again (changes meanwhile are caught by the
// version check).
func (r *redisBackend) subscribe(ctx context.Context, notify func(), log *slog.Logger) {
	backoff := reconnect.Backoff(100*time.Millisecond, 5*time.Second)
	for ctx.Err() == nil {
		c, err := r.get()
		if err == nil {
			began := time.Now()
			err = c.Receive(ctx, c.B().Subscribe().Channel(r.channel).Build(), func(rueidis.PubSubMessage) { notify() })
			notify() // whatever was missed while the subscription was down
			if time.Since(began) > 10*time.Second {
				backoff.Reset() // it was up a while: a fresh outage
			}
		}
		if ctx.Err() != nil {
			return
		}
		log.Debug("override subscription lost; subscribing again", "error", err)
		if !reconnect.Sleep(ctx, backoff.NextBackOff()) {
			return
		}
	}
}
