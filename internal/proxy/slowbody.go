package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// ErrBodyTooSlow is the error a request body's Read returns when the client
// sends it more slowly than MinBodyRate allows. The proxy answers such a
// request with 408 Request Timeout.
var ErrBodyTooSlow = errors.New("proxy: the request body arrives too slowly")

// MinBodyRate cuts request bodies sent more slowly than bytesPerSecond on
// average after grace: the first n bytes must have arrived within grace +
// n/bytesPerSecond of the handler's start. A client trickling its body
// cannot then hold a connection, and the upstream's, for ever, while long
// uploads at any reasonable speed go through. After the handler, the rest
// of an unread body (which the server may read to reuse the connection) gets
// grace. bytesPerSecond ≤ 0 turns it off, the default.
func MinBodyRate(bytesPerSecond int64, grace time.Duration) Option {
	return func(o *options) { o.minBodyRate, o.bodyGrace = bytesPerSecond, grace }
}

// bodyRate wraps h in the MinBodyRate limit, if any.
func (o options) bodyRate(h http.Handler) http.Handler {
	if o.minBodyRate <= 0 {
		return h
	}
	return minBodyRate{next: h, rate: o.minBodyRate, grace: o.bodyGrace}
}

type minBodyRate struct {
	next  http.Handler
	rate  int64
	grace time.Duration
}

func (m minBodyRate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	if r.Body != nil && r.Body != http.NoBody {
		b := &slowBody{ReadCloser: r.Body, rc: rc, m: m, start: time.Now()}
		// The server cancels the request's context when the read fails, so
		// the upstream's error may be that rather than ErrBodyTooSlow.
		r = r.WithContext(context.WithValue(r.Context(), slowBodyKey{}, b))
		r.Body = b
	}
	m.next.ServeHTTP(w, r)
	_ = rc.SetReadDeadline(time.Now().Add(m.grace)) // not every ResponseWriter can; the server's own timeouts apply then
}

// slowBody is a request body read within the minimum rate.
type slowBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	m     minBodyRate
	start time.Time
	n     int64 // bytes read so far
	cut   atomic.Bool
}

type slowBodyKey struct{}

// bodyTooSlow reports whether r's body, or its original's, was cut.
func bodyTooSlow(r *http.Request) bool {
	b, ok := r.Context().Value(slowBodyKey{}).(*slowBody)
	return ok && b.cut.Load()
}

func (b *slowBody) Read(p []byte) (int, error) {
	due := b.start.Add(b.m.grace + time.Duration(float64(b.n)/float64(b.m.rate)*float64(time.Second)))
	_ = b.rc.SetReadDeadline(due)
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		b.cut.Store(true)
		err = ErrBodyTooSlow
	}
	return n, err
}
