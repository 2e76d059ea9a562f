package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
)

// Store is the Redis store: a sluice.Store that keeps each key's state in
// Redis or Redis Cluster and decides with one Lua script per request. It is
// safe for concurrent use.
type Store struct {
	run    Runner
	close  func() // closes the client the store owns (Open); nil otherwise
	prefix string
	// route and prefixes place each policy's keys on one of several Redis
	// servers (OpenRouted); route is nil otherwise.
	route    func(*sluice.Policy) int
	prefixes []string
	clock    sluice.Clock // nil: the scripts read Redis TIME
	timeout  time.Duration
	part     Partitioner           // s.run's, when it is one
	q        queues                // group commit (coalesce.go)
	cq       queues                // group commit of charges (charge.go)
	onBatch  func(order []*waiter) // a test's hook, after each batch's call
}

var (
	_ sluice.Store    = (*Store)(nil)
	_ sluice.Resetter = (*Store)(nil)
)

// Open connects to the Redis that url names and returns a Store owning the
// connection (Close closes it). url is parsed by rueidis.ParseURL:
//
//	redis://[user:password@]host:port[/db]         one Redis
//	rediss://...                                   the same over TLS
//	unix://[user:password@]/path/to/redis.sock
//	redis://host1:port?addr=host2:port&addr=...    a Cluster (any nodes; the
//	                                               client discovers the rest)
//	redis://sentinel:port?master_set=name          Sentinel
//	redis://host1:port?shard=redis://host2:port&shard=...
//	                                               independent Redis servers,
//	                                               keys spread over them
//	                                               (see ShardedRunner)
//
// A sharded URL's options (WithPassword, WithTLSConfig, WithLazyConnect)
// apply to every shard; each shard URL may carry its own credentials and
// database, and must be one server (a shard URL holding parameters of its own
// is query-escaped).
//
// Open connects before it returns and fails when it cannot (Redis down, a
// wrong address or password), so a mistake shows at once. A program that
// must start while Redis is still down passes WithLazyConnect: Open then
// returns at once, connects in the background, and calls fail with
// ErrNotConnected until it has.
//
// rueidis pipelines concurrent requests on shared connections by itself.
// Client-side caching is turned off: the store never reads through it, and
// it would require RESP3 and CLIENT TRACKING from the server.
func Open(url string, opts ...Option) (*Store, error) {
	r, closeRunner, err := openURL(url, newConfig(opts))
	if err != nil {
		return nil, fmt.Errorf("redisstore: Open: %w", err)
	}
	s := NewWithRunner(r, opts...)
	s.close = closeRunner
	return s, nil
}

// openURL connects to what a store URL names, sharded or not, and returns
// its Runner and what closes it.
func openURL(url string, cf config) (Runner, func(), error) {
	urls, err := ShardURLs(url)
	if err != nil {
		return nil, nil, err
	}
	if len(urls) == 1 {
		return openRunner(url, cf)
	}
	shards := make([]Shard, len(urls))
	closers := make([]func(), 0, len(urls))
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	for i, u := range urls {
		r, closeRunner, err := openRunner(u, cf)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("shard %d: %w", i+1, err)
		}
		closers = append(closers, closeRunner)
		name, _ := shardName(u) // ShardURLs checked it
		shards[i] = Shard{Name: name, Runner: r}
	}
	sr, err := NewShardedRunner(shards...)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return sr, closeAll, nil
}

// openRunner connects to one URL (a Redis, Cluster or Sentinel) as Open's
// options say, and returns its Runner and what closes it.
func openRunner(url string, cf config) (Runner, func(), error) {
	o, err := rueidis.ParseURL(url)
	if err != nil {
		return nil, nil, err
	}
	o.DisableCache = true
	// Every connection gets its reader at once, which notices when Redis
	// closes it (a restart, a failover) and has it redialled. rueidis' default
	// writes and reads a connection used by one call at a time on the caller's
	// goroutine, and learns it is dead only from the next call, which then
	// fails with EOF although Redis is back: after a restart, each idle
	// connection failed a decision that way. Such a call also waits for its
	// deadline (WithTimeout), not its cancellation: behind a frozen Redis, a
	// fail-over Store's timeout did not end it.
	o.AlwaysPipelining = true
	if cf.tls != nil {
		o.TLSConfig = cf.tls
	}
	if cf.password != "" {
		o.Password = cf.password
	}
	if cf.lazy {
		l := newLazyRunner(o)
		return l, l.Close, nil
	}
	c, err := rueidis.NewClient(o)
	if err != nil {
		return nil, nil, err
	}
	return NewRunner(c), c.Close, nil
}

// New returns a Store on a rueidis client the caller owns and closes (Close
// leaves it open). Give the client ClientOption.AlwaysPipelining, as Open
// does: without it a connection idle when Redis restarts is found dead only
// by the next call on it, which fails with EOF although Redis is back, and a
// lone call to a frozen Redis ignores its context's cancellation (a
// fail-over Store's adaptive timeout) until its deadline, this store's
// WithTimeout.
func New(client rueidis.Client, opts ...Option) *Store {
	return NewWithRunner(NewRunner(client), opts...)
}

// NewWithRunner returns a Store running its scripts through r, for clients
// other than rueidis (see package redisstore/goredis). The caller owns
// whatever r holds.
func NewWithRunner(r Runner, opts ...Option) *Store {
	cf := newConfig(opts)
	part, _ := r.(Partitioner)
	return &Store{run: r, prefix: cf.prefix, clock: cf.clock, timeout: cf.timeout, part: part}
}

// Close closes the client if Open created it; a Store from New or
// NewWithRunner leaves its client to the caller. It returns nil: closing a
// client reports nothing.
func (s *Store) Close() error {
	if s.close != nil {
		s.close()
	}
	return nil
}

// Decide implements sluice.Store: one FCALL (or EVALSHA) of its algorithm's
// function when it is alone, else a batch shared with the Decides and
// DecideAlls queued for the same node meanwhile (coalesce.go).
func (s *Store) Decide(ctx context.Context, req sluice.Request) (sluice.Result, error) {
	w := s.oneWaiter(ctx, req)
	if err := s.submit(w); err != nil {
		return sluice.Result{}, err
	}
	return w.oneRes[0], nil
}

// oneWaiter returns the waiter of a lone request, its slices in itself.
func (s *Store) oneWaiter(ctx context.Context, req sluice.Request) *waiter {
	w := &waiter{ctx: ctx}
	w.setOne(req, s.Key(req.Policy, req.Key))
	w.results = w.oneRes[:]
	return w
}

// keysOf returns the Redis keys of reqs.
func (s *Store) keysOf(reqs []sluice.Request) []string {
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i] = s.Key(r.Policy, r.Key)
	}
	return keys
}

// DecideAll implements sluice.Store. Keys on one node (a single Redis, or one
// Cluster slot) are decided together in a batch script, atomically, sharing
// the call with what is queued for that node (coalesce.go); keys spread over
// Cluster slots or shards take the cross-slot path (crossslot.go).
func (s *Store) DecideAll(ctx context.Context, reqs []sluice.Request, results []sluice.Result) error {
	if len(reqs) == 0 {
		return nil
	}
	keys := s.keysOf(reqs)
	if !s.run.Colocated(keys) {
		ctx, cancel := s.bound(ctx)
		defer cancel()
		return s.decideSpread(ctx, reqs, keys, results)
	}
	w := &waiter{ctx: ctx, reqs: reqs, keys: keys, all: true}
	if err := s.submit(w); err != nil {
		return err
	}
	copy(results, w.results)
	return nil
}

// Reset implements sluice.Resetter: it deletes the key holding (p, key).
func (s *Store) Reset(ctx context.Context, p *sluice.Policy, key string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var reply [1]int64
	if err := s.run.Run(ctx, scriptReset, []string{s.Key(p, key)}, nil, reply[:]); err != nil {
		return scriptError(scriptReset, err)
	}
	return nil
}

// Mode reports how the store runs its Lua on the server: ModeFunctions (one
// FCALL per decision, Redis 7+) or ModeScripts (EVALSHA, where Functions are
// unavailable), for a service to log at start-up. Before any call has reached
// Redis it loads the function library to find out, bounded by ctx and the
// store's timeout; an error means Redis could not be reached.
func (s *Store) Mode(ctx context.Context) (Mode, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	m, err := s.run.Mode(ctx)
	if err != nil {
		return "", fmt.Errorf("redisstore: Mode: %w", err)
	}
	return m, nil
}

// Key returns the Redis key that holds the state of (p, key), e.g. for an
// operator to inspect it or to reset it with DEL.
func (s *Store) Key(p *sluice.Policy, key string) string { return redisKey(s.prefixOf(p), p, key) }

// ref is Key's parts, for finding where the key lives without building it.
func (s *Store) ref(p *sluice.Policy, key string) keyRef {
	return keyRef{prefix: s.prefixOf(p), p: p, key: key}
}

// Shards returns how many independent Redis servers the store spreads its
// keys over: 1 unless it is sharded (see ShardedRunner).
func (s *Store) Shards() int {
	if sr, ok := s.run.(*ShardedRunner); ok {
		return len(sr.shards)
	}
	return 1
}

// ShardOf returns the shard, 0 to Shards()-1, that holds (p, key).
func (s *Store) ShardOf(p *sluice.Policy, key string) int {
	if sr, ok := s.run.(*ShardedRunner); ok {
		return sr.shardFor(s.ref(p, key))
	}
	return 0
}

// bound adds the per-call timeout to ctx, unless ctx already ends sooner.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return ctx, noCancel
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= s.timeout {
		return ctx, noCancel
	}
	return context.WithTimeout(ctx, s.timeout)
}

func noCancel() {}

// now is the client clock's time in µs, or 0 when the scripts read Redis TIME.
func (s *Store) now() int64 {
	if s.clock == nil {
		return 0
	}
	return s.clock.Now().UnixMicro()
}

// requestArgs is the single-request script's ARGV: now ("" for server TIME,
// else the client clock's now), mode, P, L, C, T, n, and for a refund the
// admission's two refs.
func (s *Store) requestArgs(mode string, req sluice.Request, now int64, refund bool, ref1, ref2 int64) []string {
	return s.appendArgs(make([]string, 0, 9), mode, req, now, refund, ref1, ref2)
}

// appendArgs appends requestArgs' ARGV to args.
func (s *Store) appendArgs(args []string, mode string, req sluice.Request, now int64, refund bool, ref1, ref2 int64) []string {
	P, L, C, T := policyInts(req.Policy)
	vals := [...]int64{now, P, L, C, T, req.Cost, ref1, ref2}
	var nums [len(vals)]string
	from, to := 1, 6
	if s.clock != nil {
		from = 0
	}
	if refund {
		to = 8
	}
	formatInts(nums[from:to], vals[from:to])
	args = append(args, nums[0], mode)
	return append(args, nums[1:to]...)
}

// policyInts returns the policy's period in µs, limit, capacity and emission
// interval in µs, as the scripts take them.
func policyInts(p *sluice.Policy) (P, L, C, T int64) {
	return p.Period.Microseconds(), p.Limit, p.Capacity(), p.EmissionInterval().Microseconds()
}

// formatInts writes vals as decimal strings into dst; they share one
// allocation.
func formatInts(dst []string, vals []int64) {
	var buf [192]byte
	b := buf[:0]
	for _, v := range vals {
		b = strconv.AppendInt(b, v, 10)
		b = append(b, ' ')
	}
	all := string(b)
	for i := range vals {
		j := strings.IndexByte(all, ' ')
		dst[i], all = all[:j], all[j+1:]
	}
}

// result converts a script's reply (allowed, remaining, retry, reset, delay,
// in µs) into a Result.
func result(p *sluice.Policy, r []int64) sluice.Result {
	return sluice.Result{
		Allowed:    r[replyAllowed] == 1,
		Limit:      p.Limit,
		Remaining:  r[replyRemaining],
		RetryAfter: time.Duration(r[replyRetry]) * time.Microsecond,
		ResetAfter: time.Duration(r[replyReset]) * time.Microsecond,
		Delay:      time.Duration(r[replyDelay]) * time.Microsecond,
	}
}

func scriptError(s *Script, err error) error {
	return fmt.Errorf("redisstore: %s script: %w", s.name, err)
}
