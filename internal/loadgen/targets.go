package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/storestack"
)

// KeyPlaceholder, as a descriptor entry's value, marks the entry that takes
// the per-request key.
const KeyPlaceholder = "{key}"

// TargetConfig is what Open needs to build any target; each target reads the
// fields that apply to it.
type TargetConfig struct {
	// Cost is the units each call asks for (all targets). 0 means 1.
	Cost int64
	// Timeout bounds each gRPC or HTTP call (0: 5s), and each store call of a
	// redis:// target (0: the store's default).
	Timeout time.Duration
	// Concurrency sizes the HTTP connection pool so every worker keeps its
	// connection; 0 means 64.
	Concurrency int

	// Domain is the gRPC request's domain; "" means "bench".
	Domain string
	// Descriptor is the gRPC request's single descriptor, as
	// "key=value[,key2=value2...]": see ParseDescriptor. "" means "key".
	Descriptor string

	// Policy is the policy name: the one the HTTP API checks (required for
	// http://), or the name of the library target's policy (default "bench").
	Policy string
	// The library target's policy (memory:// and redis://): Algorithm
	// (default gcra), Limit (default 1e9), Period (default 1s) and Burst.
	// The defaults admit everything a benchmark can send, so only the
	// limiter's cost is measured unless a limit is asked for.
	Algorithm sluice.Algorithm
	Limit     int64
	Period    time.Duration
	Burst     int64
}

// Open returns the target rawURL names:
//
//	grpc://host:port          an Envoy RLS v3 server (Sluice or any other)
//	http://host:port          Sluice's HTTP API, POST /v1/check
//	memory://                 the library on an in-process memory store
//	redis://… rediss://… unix://…   the library on Redis (see storestack.Open)
func Open(rawURL string, c TargetConfig) (Target, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, fmt.Errorf("target %q: want grpc://host:port, http://host:port, memory:// or redis://host:port", rawURL)
	}
	switch strings.ToLower(scheme) {
	case "grpc":
		entries, keyEntry, err := ParseDescriptor(c.Descriptor)
		if err != nil {
			return nil, err
		}
		return NewGRPC(strings.TrimRight(rest, "/"), GRPCConfig{Domain: c.Domain, Entries: entries,
			KeyEntry: keyEntry, Cost: c.Cost, Timeout: c.Timeout})
	case "http", "https":
		if c.Policy == "" {
			return nil, errors.New("an http:// target needs a policy name")
		}
		return NewHTTP(rawURL, c.Policy, c.Cost, c.Timeout, c.Concurrency)
	case "memory", "redis", "rediss", "unix":
		p := sluice.Policy{Name: c.Policy, Algorithm: c.Algorithm, Limit: c.Limit, Period: c.Period, Burst: c.Burst}
		if p.Name == "" {
			p.Name = "bench"
		}
		if p.Algorithm == "" {
			p.Algorithm = sluice.GCRA
		}
		if p.Limit == 0 {
			p.Limit = 1_000_000_000
		}
		if p.Period == 0 {
			p.Period = time.Second
		}
		timeout := c.Timeout
		if timeout == 0 {
			timeout = 5 * time.Second
		}
		// Failing closed: a store failure is counted as an error, never
		// hidden as an admission.
		st, err := storestack.Open(config.Store{URL: rawURL, Timeout: timeout, OnError: config.OnErrorClosed})
		if err != nil {
			return nil, err
		}
		t, err := NewLibrary(st.Store, p, c.Cost)
		if err != nil {
			st.Close()
			return nil, err
		}
		t.close = func() { st.Close() }
		return t, nil
	}
	return nil, fmt.Errorf("target %q: unknown scheme %q (want grpc, http, memory or redis)", rawURL, scheme)
}

// ParseDescriptor parses a descriptor given as "key=value[,key2=value2...]"
// and returns its entries and the index of the entry whose value is replaced
// by each call's key: the entry written "key={key}" or just "key", else the
// last entry. So "tenant=acme,user" sends (tenant, acme), (user, <key>), and
// "user=x" sends (user, <key>): x is replaced. At most one entry may take the
// key. "" means "key", a single entry named key.
func ParseDescriptor(s string) (entries []DescriptorEntry, keyEntry int, err error) {
	if s == "" {
		s = "key"
	}
	keyEntry = -1
	for i, part := range strings.Split(s, ",") {
		k, v, hasValue := strings.Cut(part, "=")
		if k == "" {
			return nil, 0, fmt.Errorf("descriptor %q: entry %d has no key", s, i+1)
		}
		if !hasValue || v == KeyPlaceholder {
			if keyEntry >= 0 {
				return nil, 0, fmt.Errorf("descriptor %q: entries %q and %q both ask for the key; give the other a value", s, entries[keyEntry].Key, k)
			}
			keyEntry, v = i, ""
		} else if v == "" {
			return nil, 0, fmt.Errorf("descriptor %q: entry %q has an empty value", s, k)
		}
		entries = append(entries, DescriptorEntry{Key: k, Value: v})
	}
	if keyEntry < 0 {
		keyEntry = len(entries) - 1
	}
	return entries, keyEntry, nil
}

// DescriptorEntry is one (key, value) of a rate limit descriptor.
type DescriptorEntry struct{ Key, Value string }

// GRPCConfig configures NewGRPC.
type GRPCConfig struct {
	// Domain is the request's domain; "" means "bench".
	Domain string
	// Entries are the descriptor's entries; the value of Entries[KeyEntry]
	// is replaced by each call's key. Required.
	Entries  []DescriptorEntry
	KeyEntry int
	// Cost is sent as the descriptor's hits_addend; 0 means 1.
	Cost int64
	// Timeout bounds each call; 0 means 5s.
	Timeout time.Duration
}

type grpcTarget struct {
	conn    *grpc.ClientConn
	client  rlsv3.RateLimitServiceClient
	domain  string
	fixed   []*commonv3.RateLimitDescriptor_Entry // shared, read only
	keyAt   int
	hits    uint32
	timeout time.Duration
}

// NewGRPC returns a target that calls ShouldRateLimit of the Envoy RLS v3
// server at addr (host:port) with one descriptor per request, over one
// plaintext HTTP/2 connection — how Envoy itself talks to a rate limit
// service. OK counts as allowed, OVER_LIMIT as denied, anything else as an
// error.
func NewGRPC(addr string, c GRPCConfig) (Target, error) {
	if len(c.Entries) == 0 || c.KeyEntry < 0 || c.KeyEntry >= len(c.Entries) {
		return nil, errors.New("grpc target: the descriptor needs an entry for the key")
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("grpc target %q: want host:port: %w", addr, err)
	}
	if c.Cost < 0 || c.Cost > 1<<32-1 {
		return nil, fmt.Errorf("grpc target: cost %d does not fit hits_addend (0 to 2^32-1)", c.Cost)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("grpc target %s: %w", addr, err)
	}
	t := &grpcTarget{conn: conn, client: rlsv3.NewRateLimitServiceClient(conn), domain: c.Domain,
		keyAt: c.KeyEntry, hits: uint32(max(c.Cost, 1)), timeout: c.Timeout}
	if t.domain == "" {
		t.domain = "bench"
	}
	if t.timeout <= 0 {
		t.timeout = 5 * time.Second
	}
	for _, e := range c.Entries {
		t.fixed = append(t.fixed, &commonv3.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value})
	}
	return t, nil
}

func (t *grpcTarget) Call(ctx context.Context, key string) (bool, error) {
	entries := make([]*commonv3.RateLimitDescriptor_Entry, len(t.fixed))
	copy(entries, t.fixed)
	entries[t.keyAt] = &commonv3.RateLimitDescriptor_Entry{Key: t.fixed[t.keyAt].Key, Value: key}
	req := &rlsv3.RateLimitRequest{Domain: t.domain, HitsAddend: t.hits,
		Descriptors: []*commonv3.RateLimitDescriptor{{Entries: entries}}}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	resp, err := t.client.ShouldRateLimit(ctx, req)
	if err != nil {
		return false, err
	}
	switch resp.GetOverallCode() {
	case rlsv3.RateLimitResponse_OK:
		return true, nil
	case rlsv3.RateLimitResponse_OVER_LIMIT:
		return false, nil
	}
	return false, fmt.Errorf("overall code %v", resp.GetOverallCode())
}

func (t *grpcTarget) Close() { t.conn.Close() }

// LibraryTarget calls a sluice.Limiter in process: the cost of the limiter and
// its store without any network or serialisation in front of them.
type LibraryTarget struct {
	limiter *sluice.Limiter
	cost    int64
	slots   bool // a concurrency policy
	close   func()
}

// NewLibrary returns a target that calls AllowN(key, cost) (cost 0 means 1)
// of a limiter for p on store. Close does not close the store.
func NewLibrary(store sluice.Store, p sluice.Policy, cost int64) (*LibraryTarget, error) {
	l, err := sluice.New(store, p)
	if err != nil {
		return nil, err
	}
	return &LibraryTarget{limiter: l, cost: max(cost, 1), slots: p.Algorithm == sluice.Concurrency}, nil
}

// Call implements Target. On a concurrency policy it acquires a slot and
// releases it at once: an acquisition and its release, as a request that
// ends at once makes them.
func (t *LibraryTarget) Call(ctx context.Context, key string) (bool, error) {
	if t.slots {
		res, slot, err := t.limiter.Acquire(ctx, key)
		if err != nil || slot == nil {
			return res.Allowed, err
		}
		_, err = slot.Release(ctx)
		return true, err
	}
	res, err := t.limiter.AllowN(ctx, key, t.cost)
	return res.Allowed, err
}

// Close implements Target; it closes the store when Open opened it.
func (t *LibraryTarget) Close() {
	if t.close != nil {
		t.close()
	}
}
