package sluice

import (
	"fmt"
	"time"
)

// Policy is one rate limit: at most Limit units per Period for each key.
// Name and Algorithm together identify the policy's state inside a store: two
// policies with the same Name and the same Algorithm on one store share their
// counters (whatever their Limit, Period and Burst), so changing a limit keeps
// the state, and the new numbers apply to it at once (docs/semantics.md,
// "Changing a policy"). A policy whose Algorithm differs has a state of its
// own, on every store.
type Policy struct {
	// Name: 1 to MaxNameLen bytes of letters, digits and "_-.:/".
	Name string
	// Algorithm decides how the limit is enforced.
	Algorithm Algorithm
	// Limit is L, the units admitted per Period (≥ 1); for Concurrency, the
	// slots a key may hold at once.
	Limit int64
	// Period is P: at least a millisecond, in whole microseconds. For
	// Concurrency it is the lease: a slot never released returns by itself
	// P after it was acquired.
	Period time.Duration
	// Burst is B, the bucket capacity of TokenBucket, LeakyBucket and GCRA.
	// 0 means B = L. It must be 0 for the other algorithms.
	Burst int64
}

const (
	// MaxNameLen is the longest policy name.
	MaxNameLen = 128
	// MaxKeyLen is the longest key, in bytes.
	MaxKeyLen = 1024
	// maxExact bounds every quantity the math multiplies out: Redis runs the same
	// math in Lua, whose numbers are doubles and exact only up to 2^53.
	maxExact = 1 << 53
	// maxSpan bounds periods and bucket spans (about 142 years), so that now plus
	// a span or two stays below maxExact for the next century.
	maxSpan = 1 << 52

	// MaxSlidingLogLimit caps the Limit of a sliding_log policy. The log keeps
	// one entry per admitted unit, so its state grows with the limit: at the
	// cap a key holds up to about 260 kB in Redis and 256 KiB in memory, and
	// a decision's work grows with it too.
	MaxSlidingLogLimit = 10_000
	// SlidingLogWarnLimit is the sliding_log Limit above which Warning
	// reports the state's size: valid, but costly with many keys.
	SlidingLogWarnLimit = 1_000
	// logEntryBytesRedis is what one sliding_log entry costs in Redis
	// (MEMORY USAGE of a 100,000-entry log: 2,610,320 B).
	logEntryBytesRedis = 26
	// logEntryBytesMemory is what one slot of the memory store's ring costs.
	logEntryBytesMemory = 16
)

// Validate reports the first invalid field as a *PolicyError (which wraps
// ErrInvalidPolicy), or nil.
func (p *Policy) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &PolicyError{Policy: p.Name, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if err := validName(p.Name); err != "" {
		return bad("Name", "%s", err)
	}
	if !p.Algorithm.valid() {
		return bad("Algorithm", "unknown algorithm %q (want one of %s)", string(p.Algorithm), algorithmNames)
	}
	if p.Limit < 1 {
		return bad("Limit", "must be at least 1, got %d", p.Limit)
	}
	if p.Period < time.Millisecond {
		return bad("Period", "must be at least 1ms, got %v", p.Period)
	}
	if p.Period%time.Microsecond != 0 {
		return bad("Period", "must be a whole number of microseconds, got %v", p.Period)
	}
	period := p.periodMicros()
	if period > maxSpan {
		return bad("Period", "must be at most 2^52µs (about 142 years), got %v", p.Period)
	}
	if p.Burst < 0 {
		return bad("Burst", "must not be negative, got %d", p.Burst)
	}
	if p.Burst != 0 && !p.Algorithm.isBucket() {
		return bad("Burst", "applies only to token_bucket, leaky_bucket and gcra, not %s; leave it 0", p.Algorithm)
	}
	switch {
	case p.Limit >= maxExact:
		return bad("Limit", "must be below 2^53, got %d", p.Limit)
	case p.Algorithm == SlidingLog && p.Limit > MaxSlidingLogLimit:
		return bad("Limit", "sliding_log keeps one entry per admitted unit: limit %d would hold up to %s per key in Redis (%s in memory), more than the cap of %d entries; use sliding_window or gcra, or a smaller limit over a shorter period",
			p.Limit, formatBytes(p.Limit*logEntryBytesRedis), formatBytes(memoryLogBytes(p.Limit)), MaxSlidingLogLimit)
	case p.Algorithm == Concurrency && p.Limit > MaxConcurrencyLimit:
		return bad("Limit", "concurrency holds one slot per request in flight: limit %d is more than the cap of %d slots per key", p.Limit, MaxConcurrencyLimit)
	case p.Algorithm == SlidingWindow && p.Limit > maxExact/period:
		// The decision compares prev·(P−e) with (L−cur−n)·P.
		return bad("Limit", "sliding_window needs Limit × Period (in µs) of at most 2^53; %d per %v is too large: use a shorter period or gcra", p.Limit, p.Period)
	case p.Algorithm.isBucket() && p.capacity() > maxSpan/p.emissionInterval():
		return bad("Burst", "the bucket's span (Burst × Period/Limit) must be at most 2^52µs (about 142 years), got Burst %d", p.capacity())
	}
	return nil
}

// Warning describes what makes a valid policy costly to run, or returns "".
// Today that is a sliding_log policy whose Limit is above
// SlidingLogWarnLimit: its state grows with the limit.
func (p *Policy) Warning() string {
	if p.Algorithm != SlidingLog || p.Limit <= SlidingLogWarnLimit {
		return ""
	}
	return fmt.Sprintf("sliding_log keeps one entry per admitted unit: limit %d can hold up to %s per key in Redis (%s in memory); with many keys, sliding_window or gcra cost a few dozen bytes per key",
		p.Limit, formatBytes(p.Limit*logEntryBytesRedis), formatBytes(memoryLogBytes(p.Limit)))
}

// memoryLogBytes is the largest ring the memory store keeps for a log of at
// most limit entries: 4 slots, doubled until they hold limit.
func memoryLogBytes(limit int64) int64 {
	slots := int64(4)
	for slots < limit {
		slots *= 2
	}
	return slots * logEntryBytesMemory
}

// formatBytes prints n in B, kB or MB (powers of 1000), as a person reads it.
func formatBytes(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1_000_000:
		return fmt.Sprintf("%.0f kB", float64(n)/1e3)
	case n < 1_000_000_000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/1e9)
}

func validName(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > MaxNameLen {
		return fmt.Sprintf("must be at most %d bytes, got %d", MaxNameLen, len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':' || c == '/') {
			return fmt.Sprintf("may hold only letters, digits and _-.:/, got %q", s)
		}
	}
	return ""
}

// Capacity is the largest cost the policy can admit at once: Burst (or Limit when
// Burst is 0) for the buckets, Limit for the others. A larger cost fails with
// ErrExceedsCapacity.
func (p *Policy) Capacity() int64 { return p.capacity() }

func (p *Policy) capacity() int64 {
	if p.Algorithm.isBucket() && p.Burst > 0 {
		return p.Burst
	}
	return p.Limit
}

func (p *Policy) periodMicros() int64 { return int64(p.Period / time.Microsecond) }

// EmissionInterval is T, the time one unit takes to drain from the bucket
// algorithms: Period/Limit rounded up to a whole microsecond, so they never run
// faster than Limit per Period. Stores that run the math elsewhere (the Redis
// scripts) take T from here so every store rounds alike.
func (p *Policy) EmissionInterval() time.Duration { return micros(p.emissionInterval()) }

// emissionInterval is T = P/L rounded up to a whole microsecond, so the bucket
// algorithms never run faster than L per P.
func (p *Policy) emissionInterval() int64 {
	period := p.periodMicros()
	return (period + p.Limit - 1) / p.Limit
}
