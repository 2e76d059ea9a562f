// Package reconnect paces a loop that keeps a connection open (a Redis
// subscription, an xDS stream): the waits between its attempts grow
// exponentially, with jitter, so that many nodes that lost a server together
// do not all come back at the same instant.
package reconnect

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Backoff returns the waits between attempts after failures in a row: the
// n-th is drawn at random from the upper half of d = min(first·2ⁿ, most),
// [d/2, d]. Reset starts again from first.
func Backoff(first, most time.Duration) *backoff.ExponentialBackOff {
	// backoff draws from interval·[1−f, 1+f]: an interval of ¾d and f = ⅓
	// is [d/2, d].
	return &backoff.ExponentialBackOff{
		InitialInterval:     first * 3 / 4,
		RandomizationFactor: 1.0 / 3,
		Multiplier:          2,
		MaxInterval:         most * 3 / 4,
	}
}

// Sleep waits d, or less when ctx ends first; it reports whether ctx is
// still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
