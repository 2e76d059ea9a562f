package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Floods stand for clients by loopback address: Linux routes all of
// 127.0.0.0/8 to the loopback interface, so a socket bound to 127.0.0.2
// reaches a server on 127.0.0.1 as a client of its own address.
const (
	flooder = "127.0.0.2" // the client that floods
	bystand = "127.0.0.3" // another client
)

// floodSize is want, or fewer when the process may not open that many
// files: each connection costs two, the client's and the server's.
func floodSize(t *testing.T, want int) int {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < lim.Max { // Go raises it at start; a parent may have lowered it again
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if n := int(lim.Cur-512) / 2; n < want {
		t.Logf("RLIMIT_NOFILE %d: a flood of %d connections instead of %d", lim.Cur, n, want)
		return n
	}
	return want
}

// dialerFrom connects from the loopback address from.
func dialerFrom(from string) *net.Dialer {
	return &net.Dialer{Timeout: waitLimit, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
}

// dialFrom connects to addr from the loopback address from.
func dialFrom(from, addr string) (net.Conn, error) { return dialerFrom(from).Dial("tcp", addr) }

// grpcFrom is a gRPC client of addr whose connections come from the
// loopback address from.
func grpcFrom(from, addr string) (*grpc.ClientConn, error) {
	d := dialerFrom(from)
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
}

// flood opens n connections to addr from the loopback address from, 32 at a
// time, and hands each to keep, which says whether the server kept it (a
// kept-alive connection after an answer); the others are closed. The kept
// ones are closed when the test ends.
func flood(t *testing.T, from, addr string, n int, keep func(net.Conn) bool) (kept int) {
	t.Helper()
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	next := make(chan struct{})
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range next {
				c, err := dialFrom(from, addr)
				if err != nil {
					t.Errorf("dial: %v", err)
					continue
				}
				if !keep(c) {
					c.Close()
					continue
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		})
	}
	for range n {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	return len(conns)
}

// keptAlive sends GET path on c and reports whether it was answered 200 and
// the connection kept alive: an idle connection held by the client.
func keptAlive(path string) func(net.Conn) bool {
	return func(c net.Conn) bool {
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: sluice\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(waitLimit))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200 && !resp.Close
	}
}

// clientFrom is an HTTP client whose connections come from the loopback
// address from; with fresh, each request opens a new one.
func clientFrom(from string, fresh bool) *http.Client {
	return &http.Client{Timeout: waitLimit, Transport: &http.Transport{DialContext: dialerFrom(from).DialContext, DisableKeepAlives: fresh}}
}

// probes sends n requests with c and returns how many got want. A "#" in
// body is replaced by the request's number.
func probes(t *testing.T, c *http.Client, method, url, body string, n, want int) (got int) {
	t.Helper()
	for i := range n {
		req, _ := http.NewRequest(method, url, strings.NewReader(strings.ReplaceAll(body, "#", strconv.Itoa(i))))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		if err != nil {
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == want {
			got++
		}
	}
	return got
}

// checkBody is a /v1/check of nativeConfig's policy, a key per request.
const checkBody = `{"policy":"api_per_key","key":"k#"}`

// floodLimits are the default connection limits, smaller when the flood
// must be: the per-address caps a quarter of the port's.
func floodLimits(n int) *connLimits {
	l := defaultConnLimits()
	l.httpMaxConns, l.grpcMaxConns = min(n, l.httpMaxConns), min(n, l.grpcMaxConns)
	l.httpMaxConnsPerIP, l.grpcMaxConnsPerIP = l.httpMaxConns/4, l.grpcMaxConns/4
	return &l
}

// TestServeHTTPFloodFromOneAddress: one address opens as many kept-alive
// connections as the HTTP port holds (4,096 by default). It keeps a quarter
// (--http-max-conns-per-ip); the port and its health checks go on serving
// other addresses, and the flooder's own address — a kubelet behind the
// node's address, say — still gets its health checks answered, from the
// reserve, though nothing else; the health port answers everyone.
func TestServeHTTPFloodFromOneAddress(t *testing.T) {
	n := floodSize(t, 4096)
	limits := floodLimits(n)
	s := startServe(t, nativeConfig, func(ss *serveSetup) { ss.opts.limits, ss.opts.healthAddr = limits, "127.0.0.1:0" })
	health := "http://" + s.srv.healthAddr.String()
	kept := flood(t, flooder, s.httpAddr(), n, keptAlive("/healthz"))
	t.Logf("flood of %d kept-alive connections from %s: %d kept", n, flooder, kept)
	if kept > limits.httpMaxConnsPerIP {
		t.Errorf("the flooder keeps %d connections, over its cap of %d", kept, limits.httpMaxConnsPerIP)
	}
	other, same := clientFrom(bystand, true), clientFrom(flooder, true)
	const tries = 30
	for _, p := range []struct {
		what               string
		c                  *http.Client
		method, url, body  string
		want, wantAnswered int
	}{
		{"/healthz from another address", other, "GET", s.base + "/healthz", "", 200, tries},
		{"/readyz from another address", other, "GET", s.base + "/readyz", "", 200, tries},
		{"/v1/check from another address", other, "POST", s.base + "/v1/check", checkBody, 200, tries},
		{"/healthz from the flooder's address", same, "GET", s.base + "/healthz", "", 200, tries},
		{"/readyz from the flooder's address", same, "GET", s.base + "/readyz", "", 200, tries},
		{"/v1/check from the flooder's address", same, "POST", s.base + "/v1/check", checkBody, 503, tries},
		{"/healthz on the health port from the flooder's address", same, "GET", health + "/healthz", "", 200, tries},
	} {
		if got := probes(t, p.c, p.method, p.url, p.body, tries, p.want); got < p.wantAnswered {
			t.Errorf("%s: %d of %d answered %d, want %d", p.what, got, tries, p.want, p.wantAnswered)
		}
	}
	for series, want := range map[string]float64{
		`sluice_connections_open{listener="http"}`: float64(kept),
	} {
		if v, _ := s.metricOn(t, health, series); v != want {
			t.Errorf("%s = %v, want %v", series, v, want)
		}
	}
	// The rest of the flood went to the reserve (answered, then closed) or
	// was refused when the reserve was busy.
	refused, _ := s.metricOn(t, health, `sluice_connections_refused_total{listener="http",reason="per_ip"}`)
	reserved, _ := s.metricOn(t, health, `sluice_connections_reserved_total{listener="http"}`)
	t.Logf("over the flooder's cap: %v reserved, %v refused", reserved, refused)
	if int(refused+reserved) < n-kept+2*tries {
		t.Errorf("%v connections reserved and %v refused, want the %d of the flood over the cap and the %d probes from its address",
			reserved, refused, n-kept, 2*tries)
	}
}

// metricOn is served.metric read from the port at base.
func (s *served) metricOn(t *testing.T, base, series string) (float64, bool) {
	t.Helper()
	saved := s.base
	s.base = base
	defer func() { s.base = saved }()
	return s.metric(t, series)
}

// TestServeHTTPFloodShedsTheFlooder: without a cap per address, one
// address fills the port's cap with kept-alive connections; each newcomer
// from another address then takes the place of one of them, rather than
// being refused.
func TestServeHTTPFloodShedsTheFlooder(t *testing.T) {
	n := floodSize(t, 1024)
	limits := floodLimits(n)
	limits.httpMaxConnsPerIP = 0
	s := startServe(t, nativeConfig, func(ss *serveSetup) { ss.opts.limits, ss.opts.healthAddr = limits, "127.0.0.1:0" })
	kept := flood(t, flooder, s.httpAddr(), n, keptAlive("/healthz"))
	if kept != n {
		t.Fatalf("the flood kept %d of %d connections under a cap of %d", kept, n, n)
	}
	const newcomers = 20
	var clients []*http.Client
	for i := range newcomers {
		c := clientFrom(bystand, false) // each holds its connection open
		clients = append(clients, c)
		if got := probes(t, c, "POST", s.base+"/v1/check", strings.ReplaceAll(checkBody, "#", "n"+strconv.Itoa(i)), 1, 200); got != 1 {
			t.Fatalf("newcomer %d was not served at the cap", i)
		}
	}
	for _, c := range clients {
		c.CloseIdleConnections()
	}
	if v, _ := s.metricOn(t, "http://"+s.srv.healthAddr.String(), `sluice_connections_shed_total{listener="http"}`); v < newcomers {
		t.Errorf("%v connections shed, want %d", v, newcomers)
	}
}

// rlsFrom makes one RLS call on a new connection from the loopback address
// from; its error, if any, carries a gRPC status.
func rlsFrom(from, addr string) error {
	conn, err := grpcFrom(from, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge",
		Descriptors: []*commonv3.RateLimitDescriptor{{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.1.1.1"}}}}})
	return err
}

// healthFrom makes one gRPC health check on a new connection from the
// loopback address from.
func healthFrom(from, addr string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	conn, err := grpcFrom(from, addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return r.GetStatus(), err
}

// h2Handshake sends the HTTP/2 preface and SETTINGS on c and reports
// whether the server answered with its own: a connection the gRPC server
// serves (and, here, that the client then leaves idle).
func h2Handshake(c net.Conn) bool {
	if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err != nil || (&h2conn{Conn: c}).write(h2Settings, 0, nil) != nil {
		return false
	}
	c.SetReadDeadline(time.Now().Add(waitLimit))
	var hdr [9]byte
	_, err := io.ReadFull(c, hdr[:])
	return err == nil && hdr[3] == h2Settings
}

// TestServeGRPCFloodFromOneAddress: one address opens as many idle HTTP/2
// connections as the gRPC port holds. It keeps its cap; other addresses'
// RLS calls and health checks are served; the flooder's address gets its
// health checks answered from the reserve, and its RLS calls UNAVAILABLE.
func TestServeGRPCFloodFromOneAddress(t *testing.T) {
	n := floodSize(t, 2048)
	limits := floodLimits(n)
	s := startServe(t, nativeConfig, func(ss *serveSetup) { ss.opts.limits, ss.opts.healthAddr = limits, "127.0.0.1:0" })
	kept := flood(t, flooder, s.grpcAddr(), n, h2Handshake)
	t.Logf("flood of %d HTTP/2 connections from %s: %d handshakes answered", n, flooder, kept)
	health := "http://" + s.srv.healthAddr.String()
	if v, _ := s.metricOn(t, health, `sluice_connections_open{listener="grpc"}`); v != float64(limits.grpcMaxConnsPerIP) {
		t.Errorf("the flooder holds %v gRPC connections, want its cap %d", v, limits.grpcMaxConnsPerIP)
	}
	const tries = 10
	for i := range tries {
		if err := rlsFrom(bystand, s.grpcAddr()); err != nil {
			t.Errorf("RLS call %d from another address: %v", i, err)
		}
		if st, err := healthFrom(bystand, s.grpcAddr()); err != nil || st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health check %d from another address: %v %v", i, st, err)
		}
		if st, err := healthFrom(flooder, s.grpcAddr()); err != nil || st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health check %d from the flooder's address: %v %v", i, st, err)
		}
		if err := rlsFrom(flooder, s.grpcAddr()); status.Code(err) != codes.Unavailable {
			t.Errorf("RLS call %d from the flooder's address: %v, want UNAVAILABLE", i, err)
		}
	}
}

// TestGRPCRPCTimeout: a client that opens an RPC and never sends its
// request is cut by the server after --grpc-rpc-timeout (DEADLINE_EXCEEDED),
// instead of holding the stream until its own patience ends (CANCELLED).
func TestGRPCRPCTimeout(t *testing.T) {
	s := startLimited(t, func(l *connLimits) { l.grpcRPCTimeout = short })
	conn, err := grpc.NewClient(s.grpcAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer time.AfterFunc(closeWithin, cancel).Stop()
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
		rlsv3.RateLimitService_ShouldRateLimit_FullMethodName)
	if err != nil {
		t.Fatal(err)
	}
	var resp rlsv3.RateLimitResponse
	if err := stream.RecvMsg(&resp); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("an RPC whose request never comes: %v, want DEADLINE_EXCEEDED from the server", err)
	}
}

// TestProxyFloodFromOneAddress: one address floods the proxy port with
// kept-alive connections; it keeps its cap, other addresses are proxied,
// and the health port answers the flooder's address too.
func TestProxyFloodFromOneAddress(t *testing.T) {
	n := floodSize(t, 2048)
	limits := defaultProxyLimits()
	limits.httpMaxConns = min(n, limits.httpMaxConns)
	limits.httpMaxConnsPerIP = limits.httpMaxConns / 4
	p := startProxyWith(t, proxyOpenConfig, func(o *proxyOptions) { o.limits = &limits })
	kept := flood(t, flooder, p.srv.addr.String(), n, keptAlive("/"))
	if kept != limits.httpMaxConnsPerIP {
		t.Errorf("the flooder keeps %d connections, want its cap %d", kept, limits.httpMaxConnsPerIP)
	}
	const tries = 30
	if got := probes(t, clientFrom(bystand, true), "GET", p.base+"/", "", tries, 200); got != tries {
		t.Errorf("another address: %d of %d requests proxied", got, tries)
	}
	if got := probes(t, clientFrom(flooder, true), "GET", p.health+"/healthz", "", tries, 200); got != tries {
		t.Errorf("the health port, from the flooder's address: %d of %d probes answered", got, tries)
	}
}

// TestProxyMinBodyRate: --http-min-body-rate reaches the proxy: a body
// trickled below it is cut with 408.
func TestProxyMinBodyRate(t *testing.T) {
	limits := defaultProxyLimits()
	limits.httpReadHeader = short
	p := startProxyWith(t, proxyOpenConfig, func(o *proxyOptions) { o.limits = &limits })
	c := dialRaw(t, p.srv.addr.String())
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: sluice\r\nContent-Length: 100000\r\n\r\n0123456789")
	stop := make(chan struct{})
	defer close(stop)
	go func() { // 20 bytes a second
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := c.Write([]byte{'x'}); err != nil {
					return
				}
			}
		}
	}()
	if got := expectClosedRaw(t, c); !strings.HasPrefix(got, "HTTP/1.1 408") {
		t.Errorf("a trickled body: %.60q, want 408", got)
	}
}
