package connlimit_test

import (
	"errors"
	"io"
	"net"
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
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := connlimit.New(raw, max)
	defer ln.Close()
	accepted := make(chan net.Conn, 16)
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
	dial := func() net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp", raw.Addr().String(), waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var server []net.Conn
	for range max {
		dial()
		server = append(server, recv(t, accepted))
	}
	// The kernel completes the handshake; the listener then closes it.
	over := dial()
	expectClosed(t, over)
	if ln.Open() != max || ln.Refused() != 1 {
		t.Errorf("open %d refused %d, want %d and 1", ln.Open(), ln.Refused(), max)
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
