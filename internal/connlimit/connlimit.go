// Package connlimit caps the connections a listener holds open at once.
//
// Unlike golang.org/x/net/netutil.LimitListener, which stops accepting at the
// cap and leaves new connections waiting in the kernel's backlog, a Listener
// accepts a connection over the cap and closes it at once: the client sees
// the refusal right away and can try another node, instead of hanging in a
// handshake nobody reads.
package connlimit

import (
	"net"
	"sync"
	"sync/atomic"
)

// Listener is a net.Listener that holds at most Max connections open.
type Listener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused atomic.Int64
}

// New wraps ln so that at most max (≥ 1) of its connections are open at
// once; max ≤ 0 returns a Listener without a cap.
func New(ln net.Listener, max int) *Listener {
	return &Listener{Listener: ln, max: int64(max)}
}

// Accept returns the next connection under the cap, closing any that arrive
// over it.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.open.Add(1); l.max > 0 && n > l.max {
			l.open.Add(-1)
			l.refused.Add(1)
			c.Close()
			continue
		}
		return &conn{Conn: c, l: l}, nil
	}
}

// Open is the number of connections accepted and not yet closed.
func (l *Listener) Open() int64 { return l.open.Load() }

// Refused is the number of connections closed because the cap was reached.
func (l *Listener) Refused() int64 { return l.refused.Load() }

// conn gives its slot back when closed, once however often Close is called.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
