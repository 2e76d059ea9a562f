package sluice

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
)

// Concurrency: a key's state is the set of slots held, each named by the
// token its holder got and stamped with the instant it was acquired. A slot
// acquired at At is held until it is released or until At + P, whichever
// comes first: P is the lease, so a holder that crashed or forgot cannot keep
// a slot for longer. A slot is acquired iff fewer than L are held. Stamping
// the acquisition rather than the expiry keeps the slots in the order they
// leave, and a changed Period applies to the slots already held, like a
// changed limit.

// MaxConcurrencyLimit caps the Limit of a concurrency policy: a key's state
// holds one token per slot (about 60 bytes in Redis and in memory), and a
// release looks through them.
const MaxConcurrencyLimit = 10_000

// ErrAcquireOnly: a Concurrency policy was asked to decide a cost (Allow,
// AllowAll, Store.Decide). Its slots are acquired and released instead:
// Limiter.Acquire, AcquireAll.
var ErrAcquireOnly = errors.New("sluice: a concurrency policy's slots are acquired and released, not decided")

// ErrNotConcurrency: slots were asked of a policy whose algorithm is not
// Concurrency; only a concurrency policy holds them.
var ErrNotConcurrency = errors.New("sluice: only a concurrency policy holds slots")

func errAcquireOnly(p *Policy) error {
	return fmt.Errorf("%w: policy %q: use Limiter.Acquire or AcquireAll", ErrAcquireOnly, p.Name)
}

// SlotStore is implemented by stores that hold in-flight slots, the state of
// Concurrency policies. Every store in this module implements it; the
// conformance suite (package storetest) checks it.
type SlotStore interface {
	Store
	// AcquireSlot takes one slot of (req.Policy, req.Key) when fewer than
	// Limit are held, and returns the token that releases it (a fresh
	// NewSlotToken, or a store's own form of one); when denied, or for a
	// peek (req.Cost 0, which takes nothing), the token is "". The Result
	// is AcquireSlot's. req has passed CheckSlotRequest.
	AcquireSlot(ctx context.Context, req Request) (Result, string, error)
	// ReleaseSlot gives back the slot of (p, key) that token holds and
	// reports whether it was held: false for a token already released, one
	// whose slot expired, one of another key or policy, or any other string.
	ReleaseSlot(ctx context.Context, p *Policy, key, token string) (bool, error)
}

// CheckSlotRequest reports whether req can ask a SlotStore for a slot: a
// Concurrency policy (ErrNotConcurrency), a valid key (ErrInvalidKey), and a
// cost of 1 to acquire a slot or 0 to peek (ErrInvalidCost).
func CheckSlotRequest(req Request) error {
	if req.Policy.Algorithm != Concurrency {
		return fmt.Errorf("%w: policy %q is %s", ErrNotConcurrency, req.Policy.Name, req.Policy.Algorithm)
	}
	if req.Key == "" {
		return errInvalidKeyEmpty
	}
	if len(req.Key) > MaxKeyLen {
		return &keyError{req.Key}
	}
	if req.Cost != 0 && req.Cost != 1 {
		return &costError{req.Cost, "a request holds one slot: acquire with cost 1, peek with 0"}
	}
	return nil
}

// NewSlotToken returns a fresh release token: 128 bits from crypto/rand as
// 32 lowercase hex digits, so that nobody can release a slot they were not
// given.
func NewSlotToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's documentation)
	return hex.EncodeToString(b[:])
}

// HeldSlot is one slot of a concurrency key's state.
type HeldSlot struct {
	// Token is what its holder releases it with.
	Token string
	// At is when it was acquired, in µs since the Unix epoch: it is held
	// until At + Period unless released before.
	At int64
}

// AcquireSlot is the pure core of SlotStore.AcquireSlot: it acquires a slot
// named token of the concurrency policy p at now (µs since the Unix epoch)
// from the slots held, oldest first, and returns the slots held afterwards
// and the Result. token "" peeks: nothing is acquired.
//
// The Result: Allowed when a slot was acquired (or for a peek); Remaining,
// the slots still free; when denied, RetryAfter until the oldest slot's lease
// ends, the soonest a slot is free if none is released (with a Limit lowered
// below the slots held, the lease that brings them under it); ResetAfter
// until the newest slot's lease ends. Slots whose lease has ended are
// dropped. Time that runs backwards (now before the newest slot) counts as no
// time passing.
//
// held's array is reused: it is changed in place (expired slots dropped) and
// appended to, so the caller replaces held with what AcquireSlot returns.
func AcquireSlot(p *Policy, held []HeldSlot, now int64, token string) ([]HeldSlot, Result) {
	held, now = dropExpired(p, held, now)
	limit, period := p.Limit, p.periodMicros()
	res := Result{Limit: limit}
	switch n := int64(len(held)); {
	case token == "":
		res.Allowed = true
	case n < limit:
		held = append(held, HeldSlot{Token: token, At: now})
		res.Allowed = true
	default:
		// Slots leave oldest first: the (n-L+1)th to leave brings them under L.
		res.RetryAfter = micros(held[n-limit].At + period - now)
	}
	res.Remaining = max(0, limit-int64(len(held)))
	if len(held) > 0 {
		res.ResetAfter = micros(held[len(held)-1].At + period - now)
	}
	return held, res
}

// ReleaseSlot is the pure core of SlotStore.ReleaseSlot: it gives back the
// slot named token at now and reports whether one was held (a slot whose
// lease has ended was not). Like AcquireSlot it changes held's array in
// place and drops expired slots; the caller replaces held with what it
// returns.
func ReleaseSlot(p *Policy, held []HeldSlot, now int64, token string) ([]HeldSlot, bool) {
	held, _ = dropExpired(p, held, now)
	for i := range held {
		if held[i].Token == token && token != "" {
			copy(held[i:], held[i+1:])
			held[len(held)-1] = HeldSlot{} // drop the token for the GC
			return held[:len(held)-1], true
		}
	}
	return held, false
}

// dropExpired removes, in place, the slots whose lease has ended at now, and
// returns the slots left and now, moved up to the newest slot's acquisition
// when time ran backwards.
func dropExpired(p *Policy, held []HeldSlot, now int64) ([]HeldSlot, int64) {
	if len(held) == 0 {
		return held, now
	}
	now = max(now, held[len(held)-1].At)
	horizon := now - p.periodMicros() // a slot acquired at or before it has left
	k := 0
	for k < len(held) && held[k].At <= horizon {
		k++
	}
	if k > 0 {
		n := copy(held, held[k:])
		clear(held[n:])
		held = held[:n]
	}
	return held, now
}
