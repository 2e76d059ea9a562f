// Package connlimit caps the connections a listener holds open: in all, and
// per client address, so that one client cannot take a whole port.
//
// Unlike golang.org/x/net/netutil.LimitListener, which stops accepting at the
// cap and leaves new connections waiting in the kernel's backlog, a Listener
// accepts a connection over a cap and closes it at once: the client sees the
// refusal right away and can try another node, instead of hanging in a
// handshake nobody reads.
//
// At the port's cap a newcomer is not simply refused: when another address
// holds at least two connections more than the newcomer's, that address's
// least recently active connection (an idle one first) is closed to make
// room. A flood from one address therefore sheds itself, not other clients.
//
// A Listener can keep a few reserved slots (WithReserve) for connections
// refused by a cap: such a connection is accepted anyway, lives a short while,
// and the server restricts it to health checks (IsReserved, IsReservedAddr),
// so that a probe sharing a flooding client's address — a kubelet behind the
// node's address, say — is still answered.
package connlimit

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Listener is a net.Listener that holds at most a capped number of
// connections open, in all and per client address.
type Listener struct {
	net.Listener
	max, perAddr int
	reserve      int
	reserveLife  time.Duration

	mu       sync.Mutex
	open     int
	clients  map[netip.Addr]*client
	reserved []*conn // open reserved connections

	openGauge, reservedGauge                     atomic.Int64
	refusedCap, refusedAddr, shed, reservedTotal atomic.Int64
}

// client is the connections one address holds.
type client struct{ conns []*conn }

// Option configures a Listener.
type Option func(*Listener)

// WithPerAddress caps the connections one client address (an IP; IPv4 and
// IPv4-mapped IPv6 alike) holds open; n ≤ 0 means no cap per address.
func WithPerAddress(n int) Option { return func(l *Listener) { l.perAddr = n } }

// WithReserve keeps n slots beyond the caps for connections a cap would
// refuse. Each lives at most life (its deadlines are never set later), and
// when the slots are full a new one takes the place of one not busy with a
// request (see ConnState): one that has sent nothing first, then the
// oldest. What a reserved connection may ask for is the server's decision:
// see IsReserved and IsReservedAddr.
func WithReserve(n int, life time.Duration) Option {
	return func(l *Listener) { l.reserve, l.reserveLife = n, life }
}

// New wraps ln so that at most max of its connections are open at once
// (max ≤ 0: no cap in all), within the options' caps.
func New(ln net.Listener, max int, opts ...Option) *Listener {
	l := &Listener{Listener: ln, max: max, clients: map[netip.Addr]*client{}}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Stats are a Listener's counts.
type Stats struct {
	Open              int64 // connections accepted under the caps and not yet closed
	Reserved          int64 // reserved connections open
	RefusedCap        int64 // closed on accept: the port's cap was reached
	RefusedPerAddress int64 // closed on accept: their address held its cap
	Shed              int64 // closed to make room for an address holding fewer
	ReservedTotal     int64 // connections accepted into the reserve
}

// Stats returns the listener's counts.
func (l *Listener) Stats() Stats {
	return Stats{Open: l.openGauge.Load(), Reserved: l.reservedGauge.Load(), RefusedCap: l.refusedCap.Load(),
		RefusedPerAddress: l.refusedAddr.Load(), Shed: l.shed.Load(), ReservedTotal: l.reservedTotal.Load()}
}

// Open is the number of connections accepted under the caps and not yet
// closed.
func (l *Listener) Open() int64 { return l.openGauge.Load() }

// Refused is the number of connections closed on accept, for either cap.
func (l *Listener) Refused() int64 { return l.refusedCap.Load() + l.refusedAddr.Load() }

// Accept returns the next connection within the caps, or a reserved one,
// closing those it cannot hold.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if cc := l.admit(c); cc != nil {
			return cc, nil
		}
	}
}

// admit decides raw's fate: held under the caps (perhaps after shedding
// another address's connection), reserved, or closed (nil).
func (l *Listener) admit(raw net.Conn) net.Conn {
	now := time.Now()
	c := &conn{Conn: raw, l: l, addr: addrOf(raw.RemoteAddr())}
	c.active.Store(now.UnixNano())
	l.mu.Lock()
	n := 0
	if cl := l.clients[c.addr]; cl != nil {
		n = len(cl.conns)
	}
	var victim *conn
	refused := &l.refusedCap
	switch {
	case l.perAddr > 0 && c.addr.IsValid() && n >= l.perAddr:
		refused = &l.refusedAddr
	case l.max > 0 && l.open >= l.max:
		if victim = l.shedFor(c.addr, n); victim != nil {
			refused = nil
		}
	default:
		refused = nil
	}
	if refused == nil {
		l.hold(c)
	} else if ok, evicted := l.reserveFor(c, now); ok {
		victim, refused = evicted, nil
	}
	l.mu.Unlock()
	if victim != nil {
		victim.Conn.Close()
		if !victim.reserved {
			l.shed.Add(1)
		}
	}
	if refused != nil {
		refused.Add(1)
		raw.Close()
		return nil
	}
	if c.reserved {
		l.reservedTotal.Add(1)
		raw.SetDeadline(c.deadline)
	}
	return c
}

// shedFor returns the connection to close so that a connection from addr,
// which holds n, can be held at the port's cap: the least recently active
// connection of the address holding the most, idle ones first, when that
// address holds at least n+2 (so that the two never trade places back and
// forth). It is dropped from the counts already. Nil: nothing to shed.
func (l *Listener) shedFor(addr netip.Addr, n int) *conn {
	var top *client
	for a, cl := range l.clients {
		if a != addr && (top == nil || len(cl.conns) > len(top.conns)) {
			top = cl
		}
	}
	if top == nil || len(top.conns) < n+2 {
		return nil
	}
	var victim *conn
	for _, c := range top.conns {
		if c.released.Load() {
			continue // closing already
		}
		if victim == nil || quieter(c, victim) {
			victim = c
		}
	}
	if victim == nil || !victim.released.CompareAndSwap(false, true) {
		return nil
	}
	l.drop(victim)
	return victim
}

// quieter reports whether a should be shed before b: idle before busy, then
// the longer inactive.
func quieter(a, b *conn) bool {
	if ab, bb := a.busy.Load(), b.busy.Load(); ab != bb {
		return bb
	}
	return a.active.Load() < b.active.Load()
}

// hold counts c under the caps.
func (l *Listener) hold(c *conn) {
	cl := l.clients[c.addr]
	if cl == nil {
		cl = &client{}
		l.clients[c.addr] = cl
	}
	c.idx = len(cl.conns)
	cl.conns = append(cl.conns, c)
	l.open++
	l.openGauge.Store(int64(l.open))
}

// reserveFor takes a reserved slot for c. When they are all taken, c takes
// the place of a reserved connection not busy with a request (returned, to
// be closed, and dropped from the counts already): one that has sent nothing
// first, then the oldest.
func (l *Listener) reserveFor(c *conn, now time.Time) (ok bool, evicted *conn) {
	if l.reserve <= 0 {
		return false, nil
	}
	if len(l.reserved) >= l.reserve {
		for _, r := range l.reserved {
			if !r.busy.Load() && !r.released.Load() && (evicted == nil || staler(r, evicted)) {
				evicted = r
			}
		}
		if evicted == nil || !evicted.released.CompareAndSwap(false, true) {
			return false, nil
		}
		l.drop(evicted)
	}
	c.reserved, c.deadline = true, now.Add(l.reserveLife)
	c.idx = len(l.reserved)
	l.reserved = append(l.reserved, c)
	l.reservedGauge.Store(int64(len(l.reserved)))
	return true, evicted
}

// staler reports whether reserved connection a should give its slot up
// before b: silent before spoken, then the older.
func staler(a, b *conn) bool {
	if as, bs := a.spoke.Load(), b.spoke.Load(); as != bs {
		return bs
	}
	return a.deadline.Before(b.deadline)
}

// drop forgets c, which was held or reserved.
func (l *Listener) drop(c *conn) {
	if c.reserved {
		l.reserved = removeAt(l.reserved, c.idx)
		l.reservedGauge.Store(int64(len(l.reserved)))
		return
	}
	cl := l.clients[c.addr]
	if cl.conns = removeAt(cl.conns, c.idx); len(cl.conns) == 0 {
		delete(l.clients, c.addr)
	}
	l.open--
	l.openGauge.Store(int64(l.open))
}

// removeAt removes s[i] by moving the last element into its place.
func removeAt(s []*conn, i int) []*conn {
	last := len(s) - 1
	s[i] = s[last]
	s[i].idx = i
	s[last] = nil
	return s[:last]
}

// addrOf is the client address a cap counts: the IP, IPv4-mapped addresses
// as IPv4. Not an IP (a Unix socket): the zero Addr, which no per-address
// cap applies to.
func addrOf(a net.Addr) netip.Addr {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// conn gives its slot back when closed, once however often Close is called.
type conn struct {
	net.Conn
	l        *Listener
	addr     netip.Addr
	idx      int          // in its client's conns, or in l.reserved
	active   atomic.Int64 // when it was accepted or last read from (Unix ns)
	busy     atomic.Bool  // a request is in progress (see ConnState)
	spoke    atomic.Bool  // something was read from it
	released atomic.Bool  // dropped from the counts
	reserved bool
	deadline time.Time // reserved: when it is closed at the latest
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.active.Store(time.Now().UnixNano())
		c.spoke.Store(true)
	}
	return n, err
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	if c.released.CompareAndSwap(false, true) {
		c.l.mu.Lock()
		c.l.drop(c)
		c.l.mu.Unlock()
	}
	return err
}

// RemoteAddr marks a reserved connection's address (IsReservedAddr), for
// servers such as gRPC's that show handlers the address but not the
// connection.
func (c *conn) RemoteAddr() net.Addr {
	if c.reserved {
		return reservedAddr{c.Conn.RemoteAddr()}
	}
	return c.Conn.RemoteAddr()
}

// A reserved connection's deadlines never go past the end of its life.
func (c *conn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.bound(t)) }
func (c *conn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.bound(t)) }
func (c *conn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.bound(t)) }

func (c *conn) bound(t time.Time) time.Time {
	if c.reserved && (t.IsZero() || t.After(c.deadline)) {
		return c.deadline
	}
	return t
}

// reservedAddr is a reserved connection's remote address.
type reservedAddr struct{ net.Addr }

// IsReserved reports whether c was accepted into a Listener's reserve: the
// server should answer only health checks on it, and close it after one.
func IsReserved(c net.Conn) bool {
	cc, ok := c.(*conn)
	return ok && cc.reserved
}

// IsReservedAddr reports whether a is the RemoteAddr of a reserved
// connection.
func IsReservedAddr(a net.Addr) bool {
	_, ok := a.(reservedAddr)
	return ok
}

// ConnState is an http.Server's ConnState hook telling the Listener which of
// its connections are busy with a request: they are shed after idle ones.
func ConnState(c net.Conn, s http.ConnState) {
	if cc, ok := c.(*conn); ok {
		cc.busy.Store(s == http.StateActive)
	}
}
