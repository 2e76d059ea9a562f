package sluice

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package and by stores wrap one of these,
// so callers test them with errors.Is.
var (
	// ErrExceedsCapacity: the cost is larger than the policy can ever admit at once
	// (L for the window algorithms and the log, Burst for the buckets). Waiting
	// would not help, so this is an error rather than a denial.
	ErrExceedsCapacity = errors.New("sluice: cost exceeds the policy's capacity")
	// ErrInvalidPolicy: a Policy failed validation (the error is then a
	// *PolicyError naming the field), or a Limiter was not built by New (a
	// zero Limiter, or a nil one, as in a Check without a Limiter).
	ErrInvalidPolicy = errors.New("sluice: invalid policy")
	// ErrInvalidKey: the key is empty or longer than MaxKeyLen.
	ErrInvalidKey = errors.New("sluice: invalid key")
	// ErrInvalidCost: the cost is negative.
	ErrInvalidCost = errors.New("sluice: invalid cost")
	// ErrStoreMismatch: an all-or-nothing check spans limiters on different stores,
	// which cannot be made atomic.
	ErrStoreMismatch = errors.New("sluice: limiters of one check use different stores")
	// ErrDuplicateCheck: an all-or-nothing check names the same (policy, key) twice.
	ErrDuplicateCheck = errors.New("sluice: duplicate check")
)

// PolicyError reports which field of a Policy is invalid and why.
type PolicyError struct {
	Policy string // the policy's Name, possibly empty
	Field  string // the Go field name: "Name", "Algorithm", "Limit", "Period" or "Burst"
	Reason string
}

func (e *PolicyError) Error() string {
	if e.Policy == "" {
		return fmt.Sprintf("sluice: invalid policy: field %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("sluice: invalid policy %q: field %s: %s", e.Policy, e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidPolicy) true.
func (e *PolicyError) Unwrap() error { return ErrInvalidPolicy }

// errNotBuilt answers a call on a Limiter that New did not build: its zero
// policy would otherwise be judged, each cost "exceeding the capacity 0".
var errNotBuilt = fmt.Errorf("%w: a zero or nil Limiter: build one with sluice.New", ErrInvalidPolicy)

var errInvalidKeyEmpty = fmt.Errorf("%w: key is empty", ErrInvalidKey)

type keyError struct{ key string }

func (e *keyError) Error() string {
	return fmt.Sprintf("sluice: invalid key: %d bytes, longer than the maximum %d", len(e.key), MaxKeyLen)
}
func (e *keyError) Unwrap() error { return ErrInvalidKey }

type costError struct {
	cost   int64
	reason string // "" means negative
}

func (e *costError) Error() string {
	if e.reason != "" {
		return fmt.Sprintf("sluice: invalid cost %d: %s", e.cost, e.reason)
	}
	return fmt.Sprintf("sluice: invalid cost: %d is negative", e.cost)
}
func (e *costError) Unwrap() error { return ErrInvalidCost }

type capacityError struct {
	policy         string
	cost, capacity int64
}

func (e *capacityError) Error() string {
	return fmt.Sprintf("sluice: cost %d exceeds the capacity %d of policy %q", e.cost, e.capacity, e.policy)
}
func (e *capacityError) Unwrap() error { return ErrExceedsCapacity }
