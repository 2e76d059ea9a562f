package overrides

import (
	"context"
	_ "embed" // the Lua sources
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

var (
	//go:embed lua/set.lua
	setLua string
	//go:embed lua/delete.lua
	deleteLua string
	//go:embed lua/load.lua
	loadLua string

	setScript    = rueidis.NewLuaScript(setLua)
	deleteScript = rueidis.NewLuaScript(deleteLua)
	loadScript   = rueidis.NewLuaScript(loadLua)
)

// DefaultRedisPrefix starts every Redis key of the overrides. The hash tag
// keeps them all on one Cluster slot, so each change is one atomic script.
const DefaultRedisPrefix = "sluice:{overrides}:"

// callTimeout bounds each call to Redis.
const callTimeout = 2 * time.Second

// redisBackend keeps the overrides in Redis: a hash per policy (target →
// JSON), the set of policies that have any, and a version counter every
// change increments and publishes.
type redisBackend struct {
	opt     rueidis.ClientOption
	prefix  string
	channel string

	mu     sync.Mutex
	client rueidis.Client // nil until connected
}

// NewRedis returns a Store keeping the overrides in the Redis that opt
// describes, shared by every node using it. It connects when first needed,
// so it starts while Redis is down; Run keeps it current.
func NewRedis(opt rueidis.ClientOption, opts ...Option) *Store {
	opt.DisableCache = true
	opt.DisableRetry = true // a call fails within callTimeout; Run tries again
	if opt.Dialer.Timeout == 0 {
		// A Redis that accepts but does not answer (stopped) holds a dial,
		// and with it every call waiting for the connection, this long.
		opt.Dialer.Timeout = callTimeout
	}
	b := &redisBackend{opt: opt}
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

func (r *redisBackend) keys(policy string) []string {
	return []string{r.prefix + "policy:" + policy, r.prefix + "policies", r.prefix + "version"}
}

// stored is an override's value in its policy's hash; the policy and target
// are the hash's name and field.
type stored struct {
	Limit     int64  `json:"limit"`
	PeriodUS  int64  `json:"period_us"`
	Burst     int64  `json:"burst,omitempty"`
	ExpiresUS int64  `json:"expires_us,omitempty"`
	Reason    string `json:"reason,omitempty"`
	UpdatedUS int64  `json:"updated_us"`
}

func (r *redisBackend) put(ctx context.Context, o Override, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c, err := r.get()
	if err != nil {
		return err
	}
	v := stored{Limit: o.Limit, PeriodUS: o.Period.Microseconds(), Burst: o.Burst, Reason: o.Reason, UpdatedUS: o.UpdatedAt.UnixMicro()}
	if !o.ExpiresAt.IsZero() {
		v.ExpiresUS = o.ExpiresAt.UnixMicro()
	}
	body, _ := json.Marshal(v)
	n, err := setScript.Exec(ctx, c, r.keys(o.Policy), []string{o.Policy, o.Target(), string(body),
		strconv.FormatInt(now.UnixMicro(), 10), strconv.Itoa(MaxPerPolicy), strconv.Itoa(MaxTotal), r.channel, r.prefix + "policy:"}).AsInt64()
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case n == -1:
		return checkBounds(MaxPerPolicy, 0)
	case n == -2:
		return checkBounds(0, MaxTotal)
	}
	return nil
}

func (r *redisBackend) remove(ctx context.Context, policy, target string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c, err := r.get()
	if err != nil {
		return false, err
	}
	n, err := deleteScript.Exec(ctx, c, r.keys(policy), []string{policy, target, r.channel}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return n > 0, nil
}

func (r *redisBackend) load(ctx context.Context, now time.Time) (int64, []Override, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c, err := r.get()
	if err != nil {
		return 0, nil, err
	}
	k := r.keys("")
	vals, err := loadScript.Exec(ctx, c, k[1:], []string{r.prefix + "policy:"}).ToArray()
	if err != nil || len(vals) == 0 {
		return 0, nil, fmt.Errorf("%w: %w", ErrUnavailable, errors.Join(err, errors.New("empty reply")))
	}
	version, err := vals[0].AsInt64()
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var list []Override
	for i := 1; i+2 < len(vals); i += 3 {
		policy, _ := vals[i].ToString()
		target, _ := vals[i+1].ToString()
		body, _ := vals[i+2].ToString()
		o, ok := decodeStored(policy, target, body)
		if ok && !o.Expired(now) {
			list = append(list, o)
		}
	}
	return version, list, nil
}

// decodeStored reads one hash entry; false for one this version cannot read
// (it is skipped, not fatal: one bad entry must not drop every override).
func decodeStored(policy, target, body string) (Override, bool) {
	var v stored
	if json.Unmarshal([]byte(body), &v) != nil {
		return Override{}, false
	}
	o := Override{Policy: policy, Limit: v.Limit, Period: time.Duration(v.PeriodUS) * time.Microsecond,
		Burst: v.Burst, Reason: v.Reason, UpdatedAt: time.UnixMicro(v.UpdatedUS)}
	if v.ExpiresUS > 0 {
		o.ExpiresAt = time.UnixMicro(v.ExpiresUS)
	}
	switch kind, name, _ := strings.Cut(target, ":"); kind {
	case "k":
		o.Key = name
	case "p":
		o.Prefix = name
	default:
		return Override{}, false
	}
	return o, true
}

func (r *redisBackend) version(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c, err := r.get()
	if err != nil {
		return 0, err
	}
	v, err := c.Do(ctx, c.B().Get().Key(r.prefix+"version").Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return v, nil
}

// subscribe calls notify for every change published, until ctx ends; a
// lost subscription is made again (changes meanwhile are caught by the
// version check).
func (r *redisBackend) subscribe(ctx context.Context, notify func(), log *slog.Logger) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		c, err := r.get()
		if err == nil {
			began := time.Now()
			err = c.Receive(ctx, c.B().Subscribe().Channel(r.channel).Build(), func(rueidis.PubSubMessage) { notify() })
			notify() // whatever was missed while the subscription was down
			if time.Since(began) > 10*time.Second {
				backoff = 100 * time.Millisecond // it was up a while: a fresh outage
			}
		}
		if ctx.Err() != nil {
			return
		}
		log.Debug("override subscription lost; subscribing again", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
