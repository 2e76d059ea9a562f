package connlimit_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/connlimit"
)

// waitLimit bounds every wait generously: the machine may be busy.
const waitLimit = 10 * time.Second

// A connection over the cap is closed at once; one under it stays open; a
// closed connection frees its slot.
func TestListenerCap(t *testing.T) {
	const max = 3
	ln, addr := listen(t, max)
	accepted := serveAccepts(t, ln)
	dial := func() net.Conn { return dialFrom(t, "127.0.0.1", addr) }
	var server []net.Conn
	for range max {
		dial()
		server = append(server, recv(t, accepted))
	}
	// The kernel completes the handshake; the listener then closes it.
	over := dial()
	expectClosed(t, over)
	if st := ln.Stats(); st.Open != max || st.RefusedCap != 1 || ln.Refused() != 1 {
		t.Errorf("%+v, want %d open and 1 refused", st, max)
	}
	server[0].Close()
	server[0].Close() // a second Close gives back nothing more
	if ln.Open() != max-1 {
		t.Errorf("open %d after a close, want %d", ln.Open(), max-1)
	}
	dial()
	recv(t, accepted)
	if ln.Open() != max || ln.Refused() != 1 {
		t.Errorf("open %d refused %d, want %d and 1", ln.Open(), ln.Refused(), max)
	}
}

func recv(t *testing.T, accepted <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-accepted:
		return c
	case <-time.After(waitLimit):
		t.Fatal("no connection accepted")
		return nil
	}
}

// expectClosed reads from c until the peer closes it (EOF or a reset), and
// fails if it stays open for waitLimit.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(waitLimit))
	_, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("connection over the cap still open")
	}
}

// serveAccepts runs ln's accept loop, sending what it accepts to the
// returned channel, until ln closes.
func serveAccepts(t *testing.T, ln net.Listener) <-chan net.Conn {
	t.Helper()
	accepted := make(chan net.Conn, 256)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	return accepted
}

// listen returns a loopback listener wrapped by connlimit.New.
func listen(t *testing.T, max int, opts ...connlimit.Option) (*connlimit.Listener, string) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return connlimit.New(raw, max, opts...), raw.Addr().String()
}

// dialFrom connects to addr from the loopback address from (such as
// "127.0.0.2"): Linux routes all of 127.0.0.0/8 to the loopback interface,
// so each stands for a client address of its own.
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: waitLimit, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// expectOpen checks that c is still open: a read waits without EOF.
func expectOpen(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection closed: %v", err)
	}
}

// One address holds at most its cap; another address still gets in, and
// the port's cap is not reached.
func TestListenerPerAddress(t *testing.T) {
	ln, addr := listen(t, 100, connlimit.WithPerAddress(3))
	accepted := serveAccepts(t, ln)
	for range 3 {
		dialFrom(t, "127.0.0.2", addr)
		recv(t, accepted)
	}
	expectClosed(t, dialFrom(t, "127.0.0.2", addr))
	dialFrom(t, "127.0.0.3", addr)
	recv(t, accepted)
	if st := ln.Stats(); st.Open != 4 || st.RefusedPerAddress != 1 || st.RefusedCap != 0 {
		t.Errorf("%+v, want 4 open and 1 refused per address", st)
	}
}

// At the port's cap, a newcomer from another address takes the place of
// the least recently active connection of the address holding the most,
// an idle one before a busy one; an address holding about as many as the
// newcomer is not shed.
func TestListenerShedsTheMostConnected(t *testing.T) {
	ln, addr := listen(t, 6)
	accepted := serveAccepts(t, ln)
	var flood, floodServer []net.Conn
	for range 5 {
		flood = append(flood, dialFrom(t, "127.0.0.2", addr))
		floodServer = append(floodServer, recv(t, accepted))
	}
	// The oldest is busy with a request; the second oldest is shed.
	connlimit.ConnState(floodServer[0], http.StateActive)
	for _, c := range flood[2:] {
		io.WriteString(c, "x") // active after flood[1]
	}
	for _, c := range floodServer[2:] {
		c.Read(make([]byte, 1))
	}
	dialFrom(t, "127.0.0.3", addr) // the port's last slot
	recv(t, accepted)
	dialFrom(t, "127.0.0.3", addr) // over the cap: 127.0.0.2 holds 5 ≥ 1+2
	recv(t, accepted)
	expectClosed(t, flood[1])
	for _, c := range append([]net.Conn{flood[0]}, flood[2:]...) {
		expectOpen(t, c)
	}
	if st := ln.Stats(); st.Open != 6 || st.Shed != 1 || st.RefusedCap != 0 {
		t.Errorf("%+v, want 6 open and 1 shed", st)
	}
	// 127.0.0.2 now holds 4 and 127.0.0.3 holds 2: 4 ≥ 2+2, shed once more;
	// then 3 against 3, and the newcomer is refused.
	dialFrom(t, "127.0.0.3", addr)
	recv(t, accepted)
	expectClosed(t, dialFrom(t, "127.0.0.3", addr))
	expectClosed(t, dialFrom(t, "127.0.0.2", addr))
	if st := ln.Stats(); st.Open != 6 || st.Shed != 2 || st.RefusedCap != 2 {
		t.Errorf("%+v, want 6 open, 2 shed and 2 refused", st)
	}
}

// Connections a cap refuses go to the reserve while it has room: marked
// reserved, closed at the end of their life whatever deadline the server
// sets. A full reserve makes room by closing a reserved connection that is
// not busy with a request, a silent one first, then the oldest; it refuses
// when every one is busy.
func TestListenerReserve(t *testing.T) {
	const life = 300 * time.Millisecond
	ln, addr := listen(t, 1, connlimit.WithReserve(2, life))
	accepted := serveAccepts(t, ln)
	dialFrom(t, "127.0.0.2", addr)
	if held := recv(t, accepted); connlimit.IsReserved(held) || connlimit.IsReservedAddr(held.RemoteAddr()) {
		t.Fatal("a connection under the cap is reserved")
	}
	r1 := dialFrom(t, "127.0.0.2", addr)
	s1 := recv(t, accepted)
	if !connlimit.IsReserved(s1) || !connlimit.IsReservedAddr(s1.RemoteAddr()) {
		t.Fatal("a connection over the cap is not reserved")
	}
	io.WriteString(r1, "GET")
	s1.Read(make([]byte, 3))
	connlimit.ConnState(s1, http.StateActive) // r1 is busy with a request
	r2 := dialFrom(t, "127.0.0.3", addr)
	s2 := recv(t, accepted)
	r3 := dialFrom(t, "127.0.0.4", addr) // takes the place of r2, which is silent
	s3 := recv(t, accepted)
	expectClosed(t, r2)
	s2.Close() // as the server would, after its read fails: gives back nothing more
	io.WriteString(r3, "GET")
	s3.Read(make([]byte, 3))
	dialFrom(t, "127.0.0.5", addr) // takes the place of r3, which has spoken but is idle
	s4 := recv(t, accepted)
	expectClosed(t, r3)
	expectOpen(t, r1)
	connlimit.ConnState(s4, http.StateActive)
	expectClosed(t, dialFrom(t, "127.0.0.6", addr)) // every reserved connection is busy
	if st := ln.Stats(); st.Open != 1 || st.Reserved != 2 || st.ReservedTotal != 4 || st.RefusedCap != 1 {
		t.Errorf("%+v, want 1 open, 2 reserved of 4, 1 refused", st)
	}
	// The server asks for no deadline; the reserve's life bounds it anyway.
	s4.SetReadDeadline(time.Time{})
	start := time.Now()
	_, err := s4.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) > waitLimit {
		t.Errorf("a reserved connection read %v after %v, want its life's deadline", err, time.Since(start))
	}
	s1.SetDeadline(time.Now().Add(time.Hour))
	if _, err := s1.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a reserved connection's deadline was extended: %v", err)
	}
}
