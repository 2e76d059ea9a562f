package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/testwait"
)

// short is a timeout the tests want to see fire: they wait for its effect up
// to closeWithin, and never assert how soon it came.
const short = 300 * time.Millisecond

// startLimited runs serve with the default limits changed by mod.
func startLimited(t *testing.T, mod func(*connLimits)) *served {
	t.Helper()
	l := defaultConnLimits()
	mod(&l)
	return startServe(t, nativeConfig, func(s *serveSetup) { s.opts.limits = &l })
}

func (s *served) grpcAddr() string { return s.srv.grpcAddr.String() }
func (s *served) httpAddr() string { return s.srv.httpAddr.String() }

// The gRPC port holds at most --grpc-max-conns connections. One more, from
// the address holding them all, goes to the health reserve: its health
// checks are answered, its RLS calls are UNAVAILABLE. A freed slot serves
// RLS calls again.
func TestGRPCConnectionCap(t *testing.T) {
	const max = 3
	s := startLimited(t, func(l *connLimits) { l.grpcMaxConns, l.grpcHandshake, l.grpcIdle = max, time.Minute, 0 })
	var held []*h2conn
	for range max {
		h := dialH2(t, s.grpcAddr())
		h.settings() // served: the server answered the handshake
		held = append(held, h)
	}
	if st, err := healthFrom("127.0.0.1", s.grpcAddr()); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("a health check over the cap: %v %v, want SERVING from the reserve", st, err)
	}
	if err := rlsFrom("127.0.0.1", s.grpcAddr()); status.Code(err) != codes.Unavailable {
		t.Errorf("an RLS call over the cap: %v, want UNAVAILABLE", err)
	}
	if v, _ := s.metric(t, `sluice_connections_reserved_total{listener="grpc"}`); v < 2 {
		t.Errorf("reserved connections metric %v, want at least 2", v)
	}
	if v, _ := s.metric(t, `sluice_connections_open{listener="grpc"}`); v != max {
		t.Errorf("open connections metric %v, want %d", v, max)
	}
	held[0].Close()
	testwait.UntilSaw(t, "an RLS call served after a slot is freed", func() (bool, string) {
		err := rlsFrom("127.0.0.1", s.grpcAddr())
		return err == nil, errString(err)
	})
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// The server advertises --grpc-max-streams as HTTP/2's
// MAX_CONCURRENT_STREAMS, which clients must respect.
func TestGRPCMaxStreams(t *testing.T) {
	s := startLimited(t, func(l *connLimits) { l.grpcMaxStreams = 7 })
	if got := dialH2(t, s.grpcAddr()).settings()[h2MaxStreams]; got != 7 {
		t.Errorf("MAX_CONCURRENT_STREAMS = %d, want 7", got)
	}
}

// A gRPC connection without RPCs is closed after --grpc-idle-timeout, with
// a GOAWAY first.
func TestGRPCIdleTimeout(t *testing.T) {
	s := startLimited(t, func(l *connLimits) { l.grpcIdle = short })
	h := dialH2(t, s.grpcAddr())
	h.settings()
	if got := h.untilClosed(); len(got) == 0 {
		t.Error("idle connection closed without GOAWAY")
	}
}

// Any gRPC connection is asked to go after --grpc-max-conn-age, busy or idle
// (the idle timeout is off here).
func TestGRPCMaxConnectionAge(t *testing.T) {
	s := startLimited(t, func(l *connLimits) { l.grpcIdle, l.grpcMaxAge, l.grpcMaxAgeGrace = 0, short, short })
	h := dialH2(t, s.grpcAddr())
	h.settings()
	if got := h.untilClosed(); len(got) == 0 {
		t.Error("old connection closed without GOAWAY")
	}
}

// A connection that never sends the HTTP/2 preface is dropped after
// --grpc-handshake-timeout, idle timeout or not.
func TestGRPCHandshakeTimeout(t *testing.T) {
	s := startLimited(t, func(l *connLimits) { l.grpcHandshake, l.grpcIdle = short, 0 })
	c := dialRaw(t, s.grpcAddr())
	expectClosedRaw(t, c)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// A client pinging more often than --grpc-keepalive-min-time is told
// ENHANCE_YOUR_CALM and disconnected.
func TestGRPCKeepaliveEnforcement(t *testing.T) {
	s := startLimited(t, func(l *connLimits) { l.grpcKeepaliveMin = time.Hour })
	h := dialH2(t, s.grpcAddr())
	h.settings()
	for i := range 5 {
		h.write(h2Ping, 0, []byte{0, 0, 0, 0, 0, 0, 0, byte(i)})
	}
	if got := h.untilClosed(); !slices.Contains(got, h2EnhanceCalm) {
		t.Errorf("GOAWAY codes %v, want ENHANCE_YOUR_CALM (%d)", got, h2EnhanceCalm)
	}
}

// httpGet sends GET /healthz on c and reads the answer.
func httpGet(t *testing.T, c net.Conn, br *bufio.Reader) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: sluice\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(waitLimit))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// The HTTP port holds at most --http-max-conns connections. One more, from
// the address holding them all, goes to the health reserve: it answers
// /healthz and closes, or answers anything else 503. A freed slot serves
// everything again.
func TestHTTPConnectionCap(t *testing.T) {
	const max = 3
	s := startLimited(t, func(l *connLimits) { l.httpMaxConns, l.httpReadHeader, l.httpIdle = max, time.Minute, time.Minute })
	var held []net.Conn
	for range max {
		c := dialRaw(t, s.httpAddr())
		if resp := httpGet(t, c, bufio.NewReader(c)); resp.StatusCode != 200 {
			t.Fatalf("/healthz: %d", resp.StatusCode)
		}
		held = append(held, c)
	}
	over := dialRaw(t, s.httpAddr())
	io.WriteString(over, "GET /healthz HTTP/1.1\r\nHost: sluice\r\n\r\n")
	if got := expectClosedRaw(t, over); !strings.HasPrefix(got, "HTTP/1.1 200") || !strings.Contains(got, "Connection: close") {
		t.Errorf("/healthz over the cap: %q, want 200 and the connection closed", got)
	}
	over = dialRaw(t, s.httpAddr())
	io.WriteString(over, "GET /metrics HTTP/1.1\r\nHost: sluice\r\n\r\n")
	if got := expectClosedRaw(t, over); !strings.HasPrefix(got, "HTTP/1.1 503") || !strings.Contains(got, "too_many_connections") {
		t.Errorf("/metrics over the cap: %q, want 503 too_many_connections", got)
	}
	held[0].Close()
	testwait.UntilSaw(t, "metrics served after a slot is freed", func() (bool, string) {
		c, err := net.DialTimeout("tcp", s.httpAddr(), waitLimit)
		if err != nil {
			return false, err.Error()
		}
		defer c.Close()
		io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: sluice\r\nConnection: close\r\n\r\n")
		got := expectClosedRaw(t, c)
		_, after, found := strings.Cut(got, "\n"+`sluice_connections_reserved_total{listener="http"} `)
		reserved, _, _ := strings.Cut(after, "\n")
		n, _ := strconv.Atoi(reserved)
		return found && n >= 2, reserved // 2, and any polls made before the slot was free
	})
}

// A kept-alive HTTP connection is closed after --http-idle-timeout.
func TestHTTPIdleTimeout(t *testing.T) {
	s := startLimited(t, func(l *connLimits) { l.httpIdle = short })
	c := dialRaw(t, s.httpAddr())
	br := bufio.NewReader(c)
	if resp := httpGet(t, c, br); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("/healthz: %d, close %v", resp.StatusCode, resp.Close)
	}
	c.SetReadDeadline(time.Now().Add(closeWithin))
	if _, err := br.ReadByte(); isTimeout(err) {
		t.Fatalf("idle connection still open after %v", closeWithin)
	}
}

// A client that never finishes its headers is dropped after
// --http-read-header-timeout.
func TestHTTPReadHeaderTimeout(t *testing.T) {
	s := startLimited(t, func(l *connLimits) { l.httpReadHeader = short })
	c := dialRaw(t, s.httpAddr())
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: slu")
	if got := expectClosedRaw(t, c); strings.Contains(got, " 200 ") {
		t.Errorf("an unfinished request was answered: %q", got)
	}
}

// Headers over --http-max-header-bytes get 431.
func TestHTTPMaxHeaderBytes(t *testing.T) {
	s := startLimited(t, func(l *connLimits) { l.httpMaxHeaderBytes = 8192 })
	c := dialRaw(t, s.httpAddr())
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: sluice\r\nX-Big: "+strings.Repeat("a", 16<<10)+"\r\n\r\n")
	if got := expectClosedRaw(t, c); !strings.HasPrefix(got, "HTTP/1.1 431") {
		t.Errorf("oversized headers: %.40q, want 431", got)
	}
}

func TestServeRejectsBadLimits(t *testing.T) {
	for _, args := range [][]string{
		{"--grpc-max-conns", "-1"},
		{"--grpc-handshake-timeout", "0s"},
		{"--grpc-keepalive-min-time", "0s"},
		{"--grpc-idle-timeout", "-1s"},
		{"--grpc-max-conns-per-ip", "-1"},
		{"--grpc-rpc-timeout", "-1s"},
		{"--http-max-conns-per-ip", "-1"},
		{"--http-idle-timeout", "0s"},
		{"--http-max-header-bytes", "100"},
		{"--drain", "-1s"},
		{"--shutdown-timeout", "0s"},
	} {
		code, _, errOut := runCmd(append([]string{"serve", "--config", "x.yaml"}, args...)...)
		if code != 2 || !strings.Contains(errOut, strings.TrimPrefix(args[0], "-")) {
			t.Errorf("%v: exit %d %q", args, code, errOut)
		}
	}
}
