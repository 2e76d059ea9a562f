package main

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// A raw HTTP/2 client, just enough to see what the gRPC server does to a
// connection — its SETTINGS, its PINGs, its GOAWAY, the close — without a
// gRPC client's reconnects and retries in the way.

// HTTP/2 frame types and flags (RFC 9113 §6).
const (
	h2Settings    = 0x4
	h2Ping        = 0x6
	h2GoAway      = 0x7
	h2FlagAck     = 0x1
	h2MaxStreams  = 0x3 // SETTINGS_MAX_CONCURRENT_STREAMS
	h2EnhanceCalm = 0xb // GOAWAY's ENHANCE_YOUR_CALM
)

// closeWithin bounds how long a test waits for the server to close a
// connection: generous, as the machine may be busy.
const closeWithin = 30 * time.Second

type h2frame struct {
	typ, flags byte
	payload    []byte
}

type h2conn struct {
	net.Conn
	t *testing.T
}

// dialH2 connects to addr and sends the client preface and an empty SETTINGS.
// A server that closes at once (a connection over the cap) may make these
// writes fail; that shows as the close on the next read, so it is not an
// error here.
func dialH2(t *testing.T, addr string) *h2conn {
	t.Helper()
	c := dialRaw(t, addr)
	h := &h2conn{Conn: c, t: t}
	if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err == nil {
		h.write(h2Settings, 0, nil)
	}
	return h
}

// dialRaw opens a TCP connection closed when the test ends.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// write sends one frame. Its error is only ever the server having closed the
// connection (EPIPE, ECONNRESET), which the next read reports as the close.
func (h *h2conn) write(typ, flags byte, payload []byte) error {
	hdr := make([]byte, 9, 9+len(payload))
	hdr[0], hdr[1], hdr[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	hdr[3], hdr[4] = typ, flags // stream 0: every frame here is the connection's
	_, err := h.Write(append(hdr, payload...))
	return err
}

// read returns the next frame, acknowledging the server's PINGs as a live
// client does; err is io.EOF (or a reset) once the server has closed.
func (h *h2conn) read() (h2frame, error) {
	h.t.Helper()
	h.SetReadDeadline(time.Now().Add(closeWithin))
	for {
		var hdr [9]byte
		if _, err := io.ReadFull(h, hdr[:]); err != nil {
			return h2frame{}, h.closed(err)
		}
		f := h2frame{typ: hdr[3], flags: hdr[4], payload: make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))}
		if _, err := io.ReadFull(h, f.payload); err != nil {
			return h2frame{}, h.closed(err)
		}
		if f.typ == h2Ping && f.flags&h2FlagAck == 0 {
			if err := h.write(h2Ping, h2FlagAck, f.payload); err != nil {
				return h2frame{}, io.EOF // the server closed while it pinged
			}
			continue
		}
		return f, nil
	}
}

// closed turns a read error into io.EOF when the server closed the
// connection, and fails the test when it was still open at the deadline.
func (h *h2conn) closed(err error) error {
	h.t.Helper()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		h.t.Fatalf("the server kept the connection open for %v", closeWithin)
	}
	return io.EOF
}

// settings reads up to the server's first SETTINGS and returns its values.
func (h *h2conn) settings() map[uint16]uint32 {
	h.t.Helper()
	for {
		f, err := h.read()
		if err != nil {
			h.t.Fatal("closed before sending SETTINGS")
		}
		if f.typ != h2Settings || f.flags&h2FlagAck != 0 {
			continue
		}
		out := map[uint16]uint32{}
		for p := f.payload; len(p) >= 6; p = p[6:] {
			out[binary.BigEndian.Uint16(p)] = binary.BigEndian.Uint32(p[2:])
		}
		return out
	}
}

// untilClosed reads until the server closes the connection and returns the
// GOAWAY error codes it sent on the way.
func (h *h2conn) untilClosed() []uint32 {
	h.t.Helper()
	var goaways []uint32
	for {
		f, err := h.read()
		if err != nil {
			return goaways
		}
		if f.typ == h2GoAway && len(f.payload) >= 8 {
			goaways = append(goaways, binary.BigEndian.Uint32(f.payload[4:]))
		}
	}
}

// expectClosedRaw reads c until the server closes it, failing the test if it
// stays open for closeWithin; it returns what the server sent.
func expectClosedRaw(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(closeWithin))
	b, err := io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server kept the connection open for %v", closeWithin)
	}
	return string(b)
}
