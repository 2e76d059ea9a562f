// Package overrides holds limits set at runtime for one key, or for every key
// under a prefix (a tenant), of a configured policy. The configuration says
// what a policy allows by default; an override replaces its limit, period
// and burst for the keys it names, until it expires or is removed.
//
// A Store keeps the overrides in memory (one node) or in Redis (every node
// using that Redis applies them: a change is published, and every node
// reads what changed since it last read, with a periodic check as the
// safety net), and serves the hot path from an immutable Set swapped in
// atomically on each change. Redis keeps the history's epoch with the
// overrides, so a node notices when Redis lost them or went back to an
// older copy, and then enforces what Redis holds.
//
// An override changes the limit, not the key's state: the state stays under
// the policy's name, so raising or lowering a limit keeps what was counted.
package overrides

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
)

// Bounds on what a Store holds.
const (
	// MaxPerPolicy caps the overrides of one policy.
	MaxPerPolicy = 1000
	// MaxTotal caps the overrides of all policies together.
	MaxTotal = 10000
	// MaxReasonLen caps a reason, in bytes.
	MaxReasonLen = 256
)

// Errors a Store returns; a *Error wraps ErrInvalid.
var (
	ErrInvalid     = errors.New("invalid override")
	ErrNotFound    = errors.New("no such override")
	ErrFull        = errors.New("too many overrides")
	ErrUnavailable = errors.New("the override store is unavailable")
)

// Error is an invalid override: Field names the field at fault, as the API
// spells it.
type Error struct {
	Field, Reason string
}

func (e *Error) Error() string { return e.Field + ": " + e.Reason }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *Error) Unwrap() error { return ErrInvalid }

// Override is one limit set at runtime. Exactly one of Key and Prefix is
// set: Key names one key of Policy, Prefix every key that starts with it.
type Override struct {
	Policy string
	Key    string
	Prefix string
	// Limit, Period and Burst replace the policy's.
	Limit  int64
	Period time.Duration
	Burst  int64
	// ExpiresAt, when not zero, is when the override stops applying.
	ExpiresAt time.Time
	// Reason says why it was set, for whoever reads the list later.
	Reason string
	// UpdatedAt is when it was last set.
	UpdatedAt time.Time
}

// Target is what the override applies to, as a field of the policy's
// override hash: "k:" + key or "p:" + prefix.
func (o *Override) Target() string {
	if o.Prefix != "" {
		return "p:" + o.Prefix
	}
	return "k:" + o.Key
}

// Expired reports whether the override no longer applies at now.
func (o *Override) Expired(now time.Time) bool {
	return !o.ExpiresAt.IsZero() && !now.Before(o.ExpiresAt)
}

// Apply returns base with the override's limit, period and burst; the name
// and algorithm stay, so the key's state is the policy's.
func (o *Override) Apply(base sluice.Policy) sluice.Policy {
	base.Limit, base.Period, base.Burst = o.Limit, o.Period, o.Burst
	return base
}

// Validate checks o against base, the policy it overrides (its algorithm
// decides which limits are valid), at now.
func (o *Override) Validate(base sluice.Policy, now time.Time) error {
	switch {
	case (o.Key == "") == (o.Prefix == ""):
		return &Error{"key", "give exactly one of key (one key) and prefix (every key starting with it)"}
	case len(o.Key) > sluice.MaxKeyLen || len(o.Prefix) > sluice.MaxKeyLen:
		return &Error{o.targetField(), fmt.Sprintf("must be at most %d bytes", sluice.MaxKeyLen)}
	case !utf8.ValidString(o.Key) || !utf8.ValidString(o.Prefix):
		return &Error{o.targetField(), "must be valid UTF-8"}
	case len(o.Reason) > MaxReasonLen:
		return &Error{"reason", fmt.Sprintf("must be at most %d bytes, got %d", MaxReasonLen, len(o.Reason))}
	case !utf8.ValidString(o.Reason):
		return &Error{"reason", "must be valid UTF-8"}
	case !o.ExpiresAt.IsZero() && !o.ExpiresAt.After(now):
		return &Error{"expires_at", "must be in the future"}
	}
	p := o.Apply(base)
	if err := p.Validate(); err != nil {
		var pe *sluice.PolicyError
		if errors.As(err, &pe) {
			return &Error{map[string]string{"Limit": "limit", "Period": "period", "Burst": "burst"}[pe.Field], pe.Reason}
		}
		return &Error{"limit", err.Error()}
	}
	return nil
}

func (o *Override) targetField() string {
	if o.Prefix != "" {
		return "prefix"
	}
	return "key"
}
