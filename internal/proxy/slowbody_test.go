package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memory"
)

// waitLimit bounds every wait generously: the machine may be busy.
const waitLimit = 10 * time.Second

// trickle sends a request with a body of 100,000 bytes announced and 10 of
// them sent, then one byte every 50 ms until the test ends: 20 bytes per
// second.
func trickle(t *testing.T, addr, path string, header ...string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); c.Close() })
	io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: sluice\r\n"+strings.Join(header, "")+"Content-Length: 100000\r\n\r\n0123456789")
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if _, err := c.Write([]byte{'x'}); err != nil {
					return
				}
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(waitLimit))
	return c, bufio.NewReader(c)
}

// MinBodyRate: a body at speed reaches the upstream whole; one trickled
// below the rate is cut with 408 and the connection closed, instead of
// holding the proxy's connection and the upstream's for ever.
func TestMinBodyRate(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, perIP, up.URL, MinBodyRate(1000, 200*time.Millisecond))
	big := strings.Repeat("x", 1<<20)
	if resp, _ := p.do(t, "POST", "/upload", nil, big); resp.StatusCode != 201 || len(up.last().Body) != len(big) {
		t.Fatalf("a fast upload: %d, %d bytes upstream", resp.StatusCode, len(up.last().Body))
	}
	c, br := trickle(t, p.Listener.Addr().String(), "/upload")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("a trickled body got no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Errorf("a trickled body: %d, close %v; want 408 and the connection closed", resp.StatusCode, resp.Close)
	}
	expectEOF(t, c, br)
}

// The forward-auth endpoint never reads a body, but the server would read
// what is left of it to reuse the connection: that gets the grace, no more.
func TestMinBodyRateForwardAuth(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte(perIP))
	if err != nil {
		t.Fatal(err)
	}
	h, err := ForwardAuth(serviceOf(cfg, memory.New()), MinBodyRate(1000, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, br := trickle(t, srv.Listener.Addr().String(), ForwardAuthPath,
		"X-Forwarded-Method: POST\r\n", "X-Forwarded-Uri: /upload\r\n", "X-Forwarded-Host: app\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("forward-auth: %d", resp.StatusCode)
	}
	expectEOF(t, c, br)
}

// expectEOF reads c until the server closes it, failing if it stays open.
func expectEOF(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(waitLimit))
	if _, err := io.Copy(io.Discard, br); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the connection is still open after %v", waitLimit)
	}
}
