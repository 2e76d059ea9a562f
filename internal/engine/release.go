package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// MaxTokenLen bounds a release token: the stores' tokens are 32 hex digits
// (sluice.NewSlotToken), and the fail policy's prefix theirs with at most 6
// bytes ("local:"). A longer one is no token any store gave.
const MaxTokenLen = 38

// Release gives back the in-flight slot of (p, key) that token holds — the
// Token of a check Decide admitted — and reports whether it was held: false
// for a token already released, one whose slot's lease had ended, one of
// another key or policy, or any other string, which change nothing. The
// slot's lease is read under the limit its key is decided under (its
// override's or plan's), as when it was acquired. An invalid release (not
// a concurrency policy, a bad key, a token too long) is a *CheckError; a
// store failure wraps ErrStore, and the slot then returns when its lease
// ends.
func (e *Engine) Release(ctx context.Context, p *config.Policy, key, plan, token string) (bool, error) {
	c := Check{Policy: p, Key: key, Plan: plan}
	if err := checkRelease(&c, token); err != nil {
		return false, err
	}
	var now time.Time
	if c.Limit = e.limitOf(&c, e.overrideSet(), &now); c.Limit == nil {
		c.Limit = p
	}
	ss, ok := e.store.(sluice.SlotStore)
	if !ok {
		return false, fmt.Errorf("%w: the store (%T) holds no in-flight slots", ErrStore, e.store)
	}
	held, err := ss.ReleaseSlot(ctx, &c.Limit.Policy, key, token)
	if err != nil {
		e.storeFailed(ctx, err)
		return false, fmt.Errorf("%w: %w", ErrStore, err)
	}
	e.obs.Released(p, held)
	return held, nil
}

// checkRelease reports what makes a release of c's slot by token invalid.
func checkRelease(c *Check, token string) error {
	if c.Policy == nil {
		return &CheckError{Err: errors.New("no policy")}
	}
	if err := sluice.CheckSlotRequest(sluice.Request{Policy: &c.Policy.Policy, Key: c.Key}); err != nil {
		return &CheckError{Policy: c.Policy.Name, Err: err}
	}
	switch {
	case token == "":
		return &CheckError{Policy: c.Policy.Name, Err: ErrInvalidToken}
	case len(token) > MaxTokenLen:
		return &CheckError{Policy: c.Policy.Name, Err: fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidToken, len(token), MaxTokenLen)}
	}
	return nil
}

// ErrInvalidToken: a release token that is empty or longer than any store
// gives (MaxTokenLen).
var ErrInvalidToken = errors.New("invalid release token")
