// Package config reads Sluice's YAML configuration: the store to use, named
// policies, and Envoy rate limit domains with their descriptor trees.
//
// Two file formats are accepted, told apart by their top-level keys. The
// native format has a store: section and a list of policies:
//
//	store:
//	  url: redis://127.0.0.1:6379
//	  timeout: 50ms
//	policies:
//	  - name: api_per_key
//	    algorithm: gcra
//	    limit: 100
//	    period: 1m
//	    burst: 20
//
// envoyproxy/ratelimit's format is loaded as is: a domain: and nested
// descriptors: with key, value (a glob when it has a *), rate_limit {unit,
// unit_multiplier, requests_per_unit, name, unlimited, replaces}, shadow_mode,
// share_threshold, quota_mode, metadata. Its limits are fixed windows aligned
// to the epoch, as in envoyproxy/ratelimit. Sluice's extensions: algorithm, burst
// and period inside rate_limit, and rate_limits: a list of several limits on
// one descriptor.
//
// Parsing is strict: an unknown field, a wrong type or an invalid value is an
// error naming the file, the line and the field, and Load reports every problem
// it finds, not just the first. A Config is immutable once loaded; a reload
// builds a new one.
package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"go.yaml.in/yaml/v3"
)

// Config is a validated set of configuration files.
type Config struct {
	// Store is the store section; the zero value when no file sets one.
	Store Store
	// Policies holds every limit by name: the native policies and the limits
	// defined on Envoy descriptors.
	Policies map[string]*Policy
	// Domains holds the Envoy rate limit domains by name.
	Domains map[string]*Domain
	// Proxy is the proxy section, for `sluice proxy`; nil when no file has one.
	Proxy *Proxy
	// Files are the files the Config was read from, in order.
	Files []string

	// storeFile and storeBody locate the store section, so that problems
	// found when it is opened point at the file and line (StoreProblem).
	storeFile string
	storeBody *yaml.Node
}

// Store is the store section of the native format.
type Store struct {
	// URL selects the store: memory:// (or empty) for the embedded memory
	// store, redis://, rediss:// or unix:// for Redis (see redisstore.Open).
	URL string
	// PerSecondURL, when set, is a second Redis for the limits of periods
	// under a minute, as envoyproxy/ratelimit's REDIS_PERSECOND keeps its
	// per-second limits apart; URL holds the others. Redis stores only.
	PerSecondURL string
	// Timeout, when set, bounds every store call with this fixed timeout;
	// 0 means an adaptive timeout that follows Redis' observed latency
	// between TimeoutMin and TimeoutMax.
	Timeout time.Duration
	// TimeoutMin and TimeoutMax bound the adaptive timeout; 0 means the
	// defaults (failover.DefaultMinTimeout, failover.DefaultMaxTimeout).
	TimeoutMin, TimeoutMax time.Duration
	// OnError is the fail policy when Redis cannot decide: OnErrorLocal
	// (the default, also when empty), OnErrorClosed or OnErrorOpen.
	OnError string
	// Nodes divides every limit while OnError is local, so that N nodes
	// falling back at once admit about what the shared limit would; unset
	// (0) or 1 leaves limits as they are.
	Nodes int
	// Breaker tunes the circuit breaker in front of Redis; zero fields take
	// the defaults.
	Breaker Breaker
	// MaxKeys bounds the keys the memory store (and the local fallback)
	// holds; 0 means memory.DefaultMaxKeys.
	MaxKeys int
	// MaxBytes bounds the bytes their keys take, as the memory store charges
	// them; 0 means memory.DefaultMaxBytes.
	MaxBytes int64
	// PasswordFile names a file holding the Redis password, which then
	// replaces any password in URL (so the URL can sit in a config map and
	// the password in a secret). Relative to the config file's directory.
	PasswordFile string
	// TLS configures rediss:// connections; nil uses the system's roots.
	TLS *TLS
	// KeyPrefix starts every Redis key and channel Sluice uses (its own
	// "sluice:" follows it), so that several deployments can share one Redis
	// (envoyproxy/ratelimit's CACHE_KEY_PREFIX). It must not hold '{' or '}':
	// Sluice places the hash tags that keep a Cluster's multi-key scripts on
	// one slot itself.
	KeyPrefix string
	// Lease, when set, makes each node decide locally from quota leased
	// from Redis (package lease), for every policy but those whose own lease
	// section says otherwise; nil decides every request on Redis. Off
	// leases only the policies with a lease section of their own.
	Lease *Lease
}

// Lease is a lease section, the store's default (store.lease) or a
// policy's own; zero fields take the store's settings, then package lease's
// defaults.
type Lease struct {
	// Off decides every request on Redis (a policy's `lease: off`).
	Off bool
	// TTL is the lease lifetime d; 0 means a twentieth of each policy's
	// span (an overshoot bound of 1.05 for the buckets).
	TTL time.Duration
	// MaxLease caps the units one reservation takes; 0 means a tenth of
	// each policy's capacity.
	MaxLease int64
}

// Fail policies: what the service does with a decision Redis cannot make.
const (
	OnErrorOpen   = "open"   // admit, marked degraded: unbounded
	OnErrorClosed = "closed" // deny with an error status
	OnErrorLocal  = "local"  // decide on an in-process memory store (the default)
)

// Breaker is the store.breaker section.
type Breaker struct {
	// MinCalls is the breaker's window: it judges the last MinCalls calls,
	// never fewer; 0 means failover.DefaultMinCalls.
	MinCalls int
	// Window is how long a failure counts; 0 means failover.DefaultWindow.
	Window time.Duration
	// FailureRate is the percentage of failed calls in the window that
	// opens the breaker; 0 means failover.DefaultFailureRate.
	FailureRate int
	// Probes is how many calls a half_open breaker lets through to Redis;
	// all must succeed to close it. 0 means failover.DefaultProbes.
	Probes int
	// Cooldown is how long an open breaker keeps calls away from Redis
	// before one call probes it.
	Cooldown time.Duration
}

// TLS is the store.tls section. File names are relative to the config
// file's directory.
type TLS struct {
	CAFile             string // PEM roots that verify the server; empty: the system's
	CertFile, KeyFile  string // a client certificate, for servers that require one
	ServerName         string // the name to verify, when not the URL's host
	InsecureSkipVerify bool   // do not verify the server (tests only)
}

// Policy is a limit as configured: the policy itself plus how the service
// applies it.
type Policy struct {
	sluice.Policy
	// Shadow policies are decided and counted but never enforced: a request
	// they would deny is let through.
	Shadow bool
	// QuotaMode (an Envoy file's quota_mode) makes the limit a soft one: it
	// is counted, and a request it would deny is let through and reported
	// in the response's dynamic metadata, unless every quota-mode limit of
	// the request is exhausted. It implies Shadow: a quota-mode limit never
	// denies through the HTTP API.
	QuotaMode bool
	// Lease is the policy's own lease section, overriding store.lease; nil
	// takes the store's (always, in an Envoy-format file).
	Lease *Lease
	// RuleName is the rate_limit's name: in an Envoy file, used by replaces.
	RuleName string
	// Replaces lists the RuleNames of limits this one replaces when both match
	// one request (envoyproxy/ratelimit's replaces).
	Replaces []string
	// Plans, when set, give the policy a limit per plan (native policies
	// only); ForPlan picks one.
	Plans *Plans
	// FairShare (share: fair): the limit is shared among the policy's keys
	// (tenants), each getting its weighted max-min fair share of it while
	// their demand exceeds it; a key's override or plan sets its weight.
	FairShare bool
	// ShareInterval is how often a FairShare policy's shares are recomputed.
	ShareInterval time.Duration
	// File and Line say where the policy is defined.
	File string
	Line int
}

// DeniesAll reports whether the policy admits nothing at all: an Envoy
// file's requests_per_unit: 0, envoyproxy/ratelimit's way to ban a value.
// Such a policy has Limit 0, which sluice.Policy.Validate refuses, so it is
// never handed to a store: the service denies it without deciding.
func (p *Policy) DeniesAll() bool { return p.Limit == 0 }

// Domain is an Envoy rate limit domain: a tree of descriptors.
type Domain struct {
	Name        string
	Descriptors []*Descriptor
	index       *levelIndex // of Descriptors, when they are many; see Match
	// Shadow: no request to the domain is denied, whatever its limits say
	// (envoyproxy/ratelimit's SHADOW_MODE; see Modes). Its limits are then
	// shadow ones too.
	Shadow bool
}

// Descriptor is one node of a domain's tree. A request descriptor (a list of
// key/value entries) walks the tree one entry per level; the limits of the
// node where it ends apply.
type Descriptor struct {
	Key string
	// Value is the exact value to match; "" matches any value of Key (a
	// default); a Value with a "*" is a glob: each "*" matches any run of
	// bytes, so "foo*" is a prefix and "bar*b" matches "barb" and "barxb".
	Value string
	// Shared (share_threshold) makes every value the glob matches count as
	// the glob itself in the store key: one counter for them all.
	Shared bool
	// Limits apply to a request descriptor that ends at this node. Empty when
	// the node only groups children or is Unlimited.
	Limits []*Policy
	// Unlimited: a request descriptor ending here is always allowed.
	Unlimited bool
	// PlanKey is the descriptor_key of its limits' plans: a request
	// descriptor whose entries reach this node and then end with one entry
	// of this key names its plan there.
	PlanKey  string
	Children []*Descriptor
	index    *levelIndex // of Children, when they are many; see Match
}

// Entry is one key/value pair of a request descriptor.
type Entry struct{ Key, Value string }

// Match is the outcome of matching one request descriptor.
type Match struct {
	// Limits to apply; empty when nothing matched or the match is Unlimited.
	Limits []*Policy
	// Unlimited: the descriptor matched an unlimited node.
	Unlimited bool
	// Plan is the value of the entry that names the plan (Descriptor.PlanKey)
	// when PlanEntry; that last entry is then no part of the store key.
	Plan      string
	PlanEntry bool
}

// Policy returns the policy named name, or nil.
func (c *Config) Policy(name string) *Policy { return c.Policies[name] }

// CheckKeyPrefix says what is wrong with a store key prefix, or "". A brace
// would move or break the hash tags Sluice's keys carry: on a Cluster, the
// overrides' scripts need every key they touch on one slot.
func CheckKeyPrefix(prefix string) string {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Sprintf("%q holds '{' or '}': Sluice places the Redis Cluster hash tags in its keys itself", prefix)
	}
	return ""
}
