package httplimit_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
)

var trusted = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("2001:db8:ffff::/48"),
}

func TestClientIP(t *testing.T) {
	all := []string{"Forwarded", "X-Forwarded-For", "X-Real-IP"}
	for _, c := range []struct {
		name, remote string
		header       []string // name, value pairs
		headers      []string // consulted, in order
		want         string
	}{
		{"peer", "203.0.113.1:5000", nil, all, "203.0.113.1"},
		{"peer without port", "203.0.113.1", nil, all, "203.0.113.1"},
		{"IPv6 peer", "[2001:db8::1]:443", nil, all, "2001:db8::1"},
		{"IPv4-mapped peer", "[::ffff:203.0.113.1]:443", nil, all, "203.0.113.1"},
		{"zone dropped", "[fe80::1%eth0]:443", nil, all, "fe80::1"},
		{"unix socket", "@", nil, all, "invalid IP"},
		{"untrusted peer: XFF ignored", "203.0.113.1:1", []string{"X-Forwarded-For", "198.51.100.7"}, all, "203.0.113.1"},
		{"untrusted peer: Forwarded ignored", "203.0.113.1:1", []string{"Forwarded", "for=198.51.100.7"}, all, "203.0.113.1"},
		{"untrusted peer: X-Real-IP ignored", "203.0.113.1:1", []string{"X-Real-IP", "198.51.100.7"}, all, "203.0.113.1"},
		{"trusted peer, no header", "10.0.0.1:1", nil, all, "10.0.0.1"},
		{"XFF", "10.0.0.1:1", []string{"X-Forwarded-For", "198.51.100.7"}, all, "198.51.100.7"},
		{"XFF: rightmost untrusted wins", "10.0.0.1:1", []string{"X-Forwarded-For", "1.1.1.1, 198.51.100.7, 10.9.9.9"}, all, "198.51.100.7"},
		{"XFF over several lines", "10.0.0.1:1", []string{"X-Forwarded-For", "1.1.1.1, 2.2.2.2", "X-Forwarded-For", "10.1.1.1"}, all, "2.2.2.2"},
		{"XFF: all trusted, leftmost", "10.0.0.1:1", []string{"X-Forwarded-For", "10.3.3.3, 10.2.2.2"}, all, "10.3.3.3"},
		{"XFF: garbage stops the walk", "10.0.0.1:1", []string{"X-Forwarded-For", "1.1.1.1, junk, 10.2.2.2"}, all, "10.2.2.2"},
		{"XFF: empty", "10.0.0.1:1", []string{"X-Forwarded-For", ""}, all, "10.0.0.1"},
		{"XFF with ports and mapped", "10.0.0.1:1", []string{"X-Forwarded-For", "[2001:db8::9]:80, ::ffff:198.51.100.7"}, all, "198.51.100.7"},
		{"XFF not consulted", "10.0.0.1:1", []string{"X-Forwarded-For", "198.51.100.7"}, []string{"Forwarded"}, "10.0.0.1"},
		{"Forwarded", "10.0.0.1:1", []string{"Forwarded", `for=192.0.2.60;proto=http;by=203.0.113.43`}, all, "192.0.2.60"},
		{"Forwarded IPv6 quoted with port", "10.0.0.1:1", []string{"Forwarded", `for=192.0.2.43, For="[2001:db8:cafe::17]:4711"`}, all, "2001:db8:cafe::17"},
		{"Forwarded: walk", "10.0.0.1:1", []string{"Forwarded", `for=1.1.1.1, for=192.0.2.43;proto=https, for="[2001:db8:ffff::1]"`}, all, "192.0.2.43"},
		{"Forwarded: quoted comma", "10.0.0.1:1", []string{"Forwarded", `for=1.1.1.1;x="a,b;c", for=10.5.5.5`}, all, "1.1.1.1"},
		{"Forwarded: unknown stops", "10.0.0.1:1", []string{"Forwarded", `for=1.1.1.1, for=unknown, for=10.5.5.5`}, all, "10.5.5.5"},
		{"Forwarded: no for stops", "10.0.0.1:1", []string{"Forwarded", `for=1.1.1.1, proto=https`}, all, "10.0.0.1"},
		{"Forwarded preferred over XFF", "10.0.0.1:1", []string{"X-Forwarded-For", "1.1.1.1", "Forwarded", "for=2.2.2.2"}, all, "2.2.2.2"},
		{"X-Real-IP", "10.0.0.1:1", []string{"X-Real-IP", "198.51.100.7"}, all, "198.51.100.7"},
		{"trusted IPv6 proxy", "[2001:db8:ffff::5]:1", []string{"X-Forwarded-For", "2001:db8:1::1"}, all, "2001:db8:1::1"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		for i := 0; i+1 < len(c.header); i += 2 {
			r.Header.Add(c.header[i], c.header[i+1])
		}
		if got := httplimit.ClientIP(r, trusted, c.headers...); got.String() != c.want {
			t.Errorf("%s: %v, want %s", c.name, got, c.want)
		}
	}
}

// ipServer serves a limit of one request per minute keyed ByIP, over real
// loopback connections from 127.0.0.1, and reports which keys were charged.
func ipServer(t *testing.T, opts ...httplimit.Option) (url string, lim *sluice.Limiter) {
	t.Helper()
	store, _ := fakeStore()
	lim = newLimiter(t, store, sluice.Policy{Name: "per-ip", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Minute})
	return serve(t, append([]httplimit.Option{httplimit.Limit(lim, httplimit.ByIP())}, opts...)...).URL, lim
}

func TestSpoofedHeadersFromUntrustedPeerAreIgnored(t *testing.T) {
	url, lim := ipServer(t, httplimit.WithClientIPHeaders("Forwarded", "X-Forwarded-For", "X-Real-IP"))
	spoofs := []struct{ header, value, addr string }{
		{"X-Forwarded-For", "198.51.100.1", "198.51.100.1"},
		{"Forwarded", "for=198.51.100.2", "198.51.100.2"},
		{"X-Real-IP", "198.51.100.3", "198.51.100.3"},
	}
	if r := get(t, url, spoofs[0].header, spoofs[0].value); r.StatusCode != http.StatusOK {
		t.Fatalf("first request: %d", r.StatusCode)
	}
	for _, s := range spoofs {
		if r := get(t, url, s.header, s.value); r.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("%s: %s: %d: the spoofed address got its own bucket", s.header, s.value, r.StatusCode)
		}
	}
	if peek(t, lim, "127.0.0.1") != 0 {
		t.Fatal("127.0.0.1 was not charged")
	}
	for _, s := range spoofs {
		if peek(t, lim, s.addr) != 1 {
			t.Fatalf("%s was charged", s.addr)
		}
	}
}

func TestHeadersFromTrustedProxyAreBelieved(t *testing.T) {
	for _, c := range []struct {
		header, value, key string
	}{
		{"X-Forwarded-For", "6.6.6.6, 198.51.100.1, 10.0.0.2", "198.51.100.1"},
		{"Forwarded", `for=6.6.6.6, for="198.51.100.2:1234";proto=https, for=10.0.0.2`, "198.51.100.2"},
		{"X-Real-IP", "198.51.100.3", "198.51.100.3"},
		{"X-Forwarded-For", "::ffff:198.51.100.4", "198.51.100.4"},
	} {
		url, lim := ipServer(t, httplimit.WithTrustedProxies("127.0.0.1", "10.0.0.0/8"), httplimit.WithClientIPHeaders(c.header))
		for i, want := range []int{200, 429} {
			if r := get(t, url, c.header, c.value); r.StatusCode != want {
				t.Fatalf("%s: %s, request %d: %d, want %d", c.header, c.value, i, r.StatusCode, want)
			}
		}
		if peek(t, lim, c.key) != 0 || peek(t, lim, "6.6.6.6") != 1 || peek(t, lim, "127.0.0.1") != 1 {
			t.Fatalf("%s: %s: %s was not the key charged", c.header, c.value, c.key)
		}
		// The proxy itself, without the header, is a client of its own.
		if r := get(t, url); r.StatusCode != http.StatusOK {
			t.Fatalf("%s: the proxy's own request: %d", c.header, r.StatusCode)
		}
	}
}

func TestIPv6ClientsGroupedByPrefix(t *testing.T) {
	url, lim := ipServer(t, httplimit.WithTrustedProxies("127.0.0.0/8"))
	for i, c := range []struct {
		addr string
		want int
	}{
		{"2001:db8:1:2::1", 200},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", 429}, // same /64
		{"2001:db8:1:3::1", 200},                  // next /64
	} {
		if r := get(t, url, "X-Forwarded-For", c.addr); r.StatusCode != c.want {
			t.Fatalf("%d %s: %d, want %d", i, c.addr, r.StatusCode, c.want)
		}
	}
	if peek(t, lim, "2001:db8:1:2::/64") != 0 || peek(t, lim, "2001:db8:1:3::/64") != 0 {
		t.Fatal("the /64 prefixes were not the keys")
	}

	url, lim = ipServer(t, httplimit.WithTrustedProxies("127.0.0.0/8"), httplimit.WithIPv6Prefix(48))
	get(t, url, "X-Forwarded-For", "2001:db8:1:2::1")
	if r := get(t, url, "X-Forwarded-For", "2001:db8:1:3::1"); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("same /48: %d, want 429", r.StatusCode)
	}
	if peek(t, lim, "2001:db8:1::/48") != 0 {
		t.Fatal("the /48 prefix was not the key")
	}
}

// A real IPv6 peer, no proxy: its /64 is the key.
func TestIPv6Peer(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "per-ip", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Minute})
	mw, err := httplimit.New(httplimit.Limit(lim, httplimit.ByIP()))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mw.Handler(http.NotFoundHandler()))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	get(t, srv.URL)
	if peek(t, lim, "::/64") != 0 {
		t.Fatal("::1 was not counted under ::/64")
	}
}
