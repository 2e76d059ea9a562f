package observe

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/redisstore"
)

// Causes of store errors: the cause label of sluice_store_errors_total and
// of the log line.
const (
	CauseTimeout    = "timeout"    // no answer within the timeout
	CauseConnection = "connection" // unreachable, or the connection was lost
	CauseError      = "error"      // the store answered with an error (OOM, READONLY, ...)
)

var storeCauses = []string{CauseTimeout, CauseConnection, CauseError}

// storeCause classifies a store failure.
func storeCause(err error) string {
	var netErr net.Error
	switch {
	case errors.Is(err, failover.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return CauseTimeout
	case errors.Is(err, redisstore.ErrNotConnected), errors.As(err, &netErr), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return CauseConnection
	}
	return CauseError
}

// StoreFailed counts and logs (at most one line a second) one failed store
// call; mode is the fail policy that answered in its stead ("none").
func (o *Observer) StoreFailed(err error, mode string) {
	cause := storeCause(err)
	o.storeErrors.WithLabelValues(cause).Inc()
	o.errLog.log(o.log, time.Now(), err, cause, mode)
}

// watchFailover exports the fail-over Store's state — its circuit breaker,
// the timeout in force — and counts, times and logs every failed call to
// the primary.
func (o *Observer) watchFailover(fs *failover.Store) {

	o.degraded.WithLabelValues(fs.Mode().String())
	for _, st := range []failover.BreakerState{failover.BreakerClosed, failover.BreakerOpen, failover.BreakerHalfOpen} {
		o.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "sluice_store_breaker_state",
			Help:        "1 for the store circuit breaker's current state (closed: calls go to Redis; open: the fail policy decides without trying; half_open: a few calls probe Redis).",
			ConstLabels: prometheus.Labels{"state": st.String()},
		}, func() float64 {
			if fs.State() == st {
				return 1
			}
			return 0
		}))
	}
	o.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_store_timeout_seconds",
		Help: "The timeout the next call to Redis gets: store.timeout when set, else the adaptive timeout following Redis' latency.",
	}, func() float64 { return fs.Timeout().Seconds() }))
	o.registry.MustRegister(o.storeCalls)
	mode := fs.Mode().String()
	fs.Observe(func(c failover.Call) {
		o.storeCalls.Observe(c.Latency.Seconds())
		if c.Err != nil {
			o.StoreFailed(c.Err, mode)
		}
	})
}

// errorLog writes at most one log line per errorLogEvery about failed store
// calls, saying how many it left out since the last one.
type errorLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

const errorLogEvery = time.Second

func (l *errorLog) log(log *slog.Logger, now time.Time, err error, cause, mode string) {
	l.mu.Lock()
	if now.Sub(l.last) < errorLogEvery {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	log.Warn("store call failed", "cause", cause, "error", err.Error(), "on_error", mode, "suppressed", suppressed)
}
