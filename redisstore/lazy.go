package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"
)

// ErrNotConnected is wrapped by the errors of calls made before a lazily
// opened Store (WithLazyConnect) has reached Redis.
var ErrNotConnected = errors.New("redisstore: not connected to Redis")

// lazyRunner is the Runner of a Store opened with WithLazyConnect: it dials in
// the background, one attempt at a time, and fails calls fast until the
// client exists. rueidis dials in its constructor and fails when Redis is
// down, which would make a service that starts before Redis crash-loop.
type lazyRunner struct {
	opt    rueidis.ClientOption
	runner atomic.Pointer[rueidisRunner]

	mu      sync.Mutex
	dialing chan struct{} // closed when the attempt in flight ends; nil if none
	lastErr error
	client  rueidis.Client
	closed  bool
	wg      sync.WaitGroup
}

func newLazyRunner(opt rueidis.ClientOption) *lazyRunner {
	l := &lazyRunner{opt: opt}
	l.mu.Lock()
	l.dialLocked()
	l.mu.Unlock()
	return l
}

// get returns the connected runner. Until there is one it starts a dial if
// none is in flight and waits for it as long as ctx allows.
func (l *lazyRunner) get(ctx context.Context) (*rueidisRunner, error) {
	if r := l.runner.Load(); r != nil {
		return r, nil
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, fmt.Errorf("%w: the store is closed", ErrNotConnected)
	}
	done := l.dialLocked()
	l.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: still dialing: %w", ErrNotConnected, ctx.Err())
	}
	if r := l.runner.Load(); r != nil {
		return r, nil
	}
	l.mu.Lock()
	err := l.lastErr
	l.mu.Unlock()
	return nil, fmt.Errorf("%w: %w", ErrNotConnected, err)
}

// dialLocked starts a dial unless one is in flight, and returns the channel
// closed when it ends. l.mu is held.
func (l *lazyRunner) dialLocked() chan struct{} {
	if l.dialing != nil {
		return l.dialing
	}
	done := make(chan struct{})
	l.dialing = done
	l.wg.Add(1)
	go func() { // bounded by the dial timeout; Close waits for it
		defer l.wg.Done()
		c, err := rueidis.NewClient(l.opt)
		l.mu.Lock()
		switch {
		case err != nil:
			l.lastErr = err
		case l.closed:
			c.Close()
		default:
			l.client = c
			l.runner.Store(newRueidisRunner(c))
		}
		l.dialing = nil
		l.mu.Unlock()
		close(done)
	}()
	return done
}

func (l *lazyRunner) Run(ctx context.Context, s *Script, keys, args []string, reply []int64) error {
	r, err := l.get(ctx)
	if err != nil {
		return err
	}
	return r.Run(ctx, s, keys, args, reply)
}

func (l *lazyRunner) RunMulti(ctx context.Context, calls []Call) {
	r, err := l.get(ctx)
	if err != nil {
		for i := range calls {
			calls[i].Err = err
		}
		return
	}
	r.RunMulti(ctx, calls)
}

// Mode implements Runner once connected.
func (l *lazyRunner) Mode(ctx context.Context) (Mode, error) {
	r, err := l.get(ctx)
	if err != nil {
		return "", err
	}
	return r.Mode(ctx)
}

// ModeReason implements modeReasoner once connected.
func (l *lazyRunner) ModeReason() string {
	if r := l.runner.Load(); r != nil {
		return r.ModeReason()
	}
	return ""
}

// Colocated answers for the connected client; before there is one, every
// call fails anyway.
func (l *lazyRunner) Colocated(keys []string) bool {
	if r := l.runner.Load(); r != nil {
		return r.Colocated(keys)
	}
	return true
}

// Close stops dialing, waits for an attempt in flight, and closes the client.
func (l *lazyRunner) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.wg.Wait()
	l.mu.Lock()
	if l.client != nil {
		l.client.Close()
		l.client = nil
	}
	l.mu.Unlock()
}
