package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/internal/xdsconfig"
	"github.com/sluicehq/sluice/internal/xdstest"
)

// TestServeFromXDS: serve with no file takes its domains from an xDS
// server; decisions follow them; a version that does not validate is NACKed
// and changes no decision.
func TestServeFromXDS(t *testing.T) {
	cp := xdstest.Start(t, "127.0.0.1:0")
	perDay := func(n uint32) *rlsconf.RateLimitConfig {
		c := xdstest.Domain("edge", "remote_address", "", n)
		c.Descriptors[0].RateLimit.Unit = rlsconf.RateLimitUnit_DAY // no window ends during the test
		return c
	}
	cp.Set("v1", perDay(2))

	call, logs := startXDSServe(t, xdsOptions{server: cp.Addr, nodeID: xdstest.NodeID}, "")
	expect := func(ip string, codes ...rlsv3.RateLimitResponse_Code) {
		t.Helper()
		for i, want := range codes {
			if got := call(ip).GetOverallCode(); got != want {
				t.Fatalf("%s request %d: %v, want %v", ip, i+1, got, want)
			}
		}
	}
	// Until v1 is applied the domain is unknown and has no limit; the probe
	// uses an address of its own so that it charges nothing the test counts.
	testwait.Until(t, "v1 in force", func() bool {
		return limitIs(call("10.9.9.9"), 2)
	})
	const ok, over = rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	expect("10.0.0.1", ok, ok, over)

	bad := perDay(50)
	bad.Descriptors[0].Key = ""
	cp.Set("v2", bad)
	testwait.Until(t, "the NACK of v2", func() bool {
		return cp.Seen(func(r *discovery.DiscoveryRequest) bool { return r.GetErrorDetail() != nil }) != nil
	})
	expect("10.0.0.1", over)
	expect("10.0.0.2", ok, ok, over)
	if !strings.Contains(logs.String(), "xDS configuration rejected") {
		t.Errorf("the rejection is not logged:\n%s", logs)
	}
}

// TestNACKAcrossNodes: two nodes on one Redis take their limits from one
// xDS server; a version both NACK changes no decision on either, and counts
// stay shared; the next valid version applies on both.
func TestNACKAcrossNodes(t *testing.T) {
	r := redistest.Start(t)
	cp := xdstest.Start(t, "127.0.0.1:0")
	perDay := func(n uint32) *rlsconf.RateLimitConfig {
		c := xdstest.Domain("edge", "remote_address", "", n)
		c.Descriptors[0].RateLimit.Unit = rlsconf.RateLimitUnit_DAY
		return c
	}
	cp.Set("v1", perDay(3))
	a, _ := startXDSServe(t, xdsOptions{server: cp.Addr, nodeID: xdstest.NodeID, metadata: "name=a"}, r.URL())
	b, _ := startXDSServe(t, xdsOptions{server: cp.Addr, nodeID: xdstest.NodeID, metadata: "name=b"}, r.URL())
	for _, node := range []func(string) *rlsv3.RateLimitResponse{a, b} {
		testwait.Until(t, "v1 in force", func() bool { return limitIs(node("probe"), 3) })
	}
	const ok, over = rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	expect := func(ip string, codes ...rlsv3.RateLimitResponse_Code) {
		t.Helper()
		for i, want := range codes {
			node := map[bool]func(string) *rlsv3.RateLimitResponse{true: a, false: b}[i%2 == 0]
			if got := node(ip).GetOverallCode(); got != want {
				t.Fatalf("%s request %d: %v, want %v", ip, i+1, got, want)
			}
		}
	}
	expect("10.0.0.1", ok, ok)

	bad := perDay(1000)
	bad.Descriptors[0].RateLimit.Unit = rlsconf.RateLimitUnit_UNKNOWN
	cp.Set("v2", bad)
	for _, name := range []string{"a", "b"} {
		testwait.Until(t, "the NACK of node "+name, func() bool {
			return cp.Seen(func(req *discovery.DiscoveryRequest) bool {
				return req.GetErrorDetail() != nil && req.GetNode().GetMetadata().GetFields()["name"].GetStringValue() == name
			}) != nil
		})
	}
	expect("10.0.0.1", ok, over, over) // the third of 3 a day, shared on Redis
	expect("10.0.0.2", ok, ok, ok, over)

	cp.Set("v3", perDay(5))
	for _, node := range []func(string) *rlsv3.RateLimitResponse{a, b} {
		testwait.Until(t, "v3 in force", func() bool { return limitIs(node("probe"), 5) })
	}
	expect("10.0.0.1", ok, ok, over)
}

// startXDSServe runs serve, with no file, on the xDS flags x and the store
// storeURL ("" for memory); call asks its Envoy rate limit API about
// remote_address=ip in domain edge.
func startXDSServe(t *testing.T, x xdsOptions, storeURL string) (call func(ip string) *rlsv3.RateLimitResponse, logs *syncBuffer) {
	t.Helper()
	srv, logs := startXDSServer(t, x, storeURL)
	conn, err := grpc.NewClient(srv.grpcAddr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rls := rlsv3.NewRateLimitServiceClient(conn)
	return func(ip string) *rlsv3.RateLimitResponse {
		t.Helper()
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		resp, err := rls.ShouldRateLimit(cctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*commonv3.RateLimitDescriptor{
			{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: ip}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}, logs
}

// startXDSServer runs serve in-process with x and no files.
func startXDSServer(t *testing.T, x xdsOptions, storeURL string) (*server, *syncBuffer) {
	t.Helper()
	return startWith(t, serveOptions{httpAddr: "127.0.0.1:0", grpcAddr: "127.0.0.1:0", shutdown: 5 * time.Second, xds: x, storeURL: storeURL})
}

// startWith runs serve in-process with o, logging into the buffer it
// returns; it is shut down at cleanup.
func startWith(t *testing.T, o serveOptions) (*server, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	log, _ := newLogger(logs, "text", "info")
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := startServer(ctx, o, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.wait() })
	return srv, logs
}

// limitIs reports whether call's answer carries a limit of n a unit.
func limitIs(resp *rlsv3.RateLimitResponse, n uint32) bool {
	st := resp.GetStatuses()
	return len(st) == 1 && st[0].GetCurrentLimit().GetRequestsPerUnit() == n
}

// TestServeFromXDSOverTLS: --xds-ca-file, --xds-cert-file and --xds-key-file
// connect with mutual TLS; a client certificate from another CA is refused,
// and the refusal is logged as a lost stream.
func TestServeFromXDSOverTLS(t *testing.T) {
	pki := t.TempDir()
	cert, key, ca := redistest.GenerateTLS(t, pki)
	other := filepath.Join(pki, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	strangerCert, strangerKey, _ := redistest.GenerateTLS(t, other)
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if pem, err := os.ReadFile(ca); err != nil || !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("CA: %v", err)
	}
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: roots,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})
	cp := xdstest.Start(t, "127.0.0.1:0", grpc.Creds(creds))
	cp.Set("v1", xdstest.Domain("edge", "remote_address", "", 7))

	call, _ := startXDSServe(t, xdsOptions{server: cp.Addr, nodeID: xdstest.NodeID, caFile: ca, certFile: cert, keyFile: key}, "")
	testwait.Until(t, "v1 in force over TLS", func() bool { return limitIs(call("10.0.0.1"), 7) })

	call, logs := startXDSServe(t, xdsOptions{server: cp.Addr, nodeID: xdstest.NodeID, caFile: ca,
		certFile: strangerCert, keyFile: strangerKey}, "")
	testwait.Until(t, "the refused handshake logged", func() bool { return strings.Contains(logs.String(), "xDS stream lost") })
	if limitIs(call("10.0.0.1"), 7) {
		t.Error("a client the server refused got its configuration")
	}
}

// TestXDSFlags: envoyproxy/ratelimit's variables give the defaults only when
// it is configured for xDS; bad node metadata is a usage error.
func TestXDSFlags(t *testing.T) {
	env := map[string]string{"CONFIG_GRPC_XDS_SERVER_URL": "cp:18000", "CONFIG_GRPC_XDS_NODE_ID": "rl",
		"CONFIG_GRPC_XDS_NODE_METADATA": "a=b", "CONFIG_GRPC_XDS_SERVER_USE_TLS": "true",
		"CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "ca.pem", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "c.pem",
		"CONFIG_GRPC_XDS_CLIENT_TLS_KEY": "c.key", "CONFIG_GRPC_XDS_SERVER_TLS_SAN": "cp.internal"}
	for _, xdsType := range []bool{false, true} {
		if xdsType {
			env["CONFIG_TYPE"] = "GRPC_XDS_SOTW"
		}
		var x xdsOptions
		x.addFlags(flag.NewFlagSet("t", flag.ContinueOnError), func(k string) string { return env[k] })
		want := xdsOptions{nodeID: "default", wait: 30 * time.Second, maxBytes: xdsconfig.DefaultMaxBytes}
		if xdsType {
			want = xdsOptions{server: "cp:18000", nodeID: "rl", metadata: "a=b", tls: true, caFile: "ca.pem",
				certFile: "c.pem", keyFile: "c.key", serverName: "cp.internal", wait: 30 * time.Second,
				maxBytes: xdsconfig.DefaultMaxBytes}
		}
		if x != want {
			t.Errorf("CONFIG_TYPE=%q: %+v, want %+v", env["CONFIG_TYPE"], x, want)
		}
	}
	md, err := (&xdsOptions{metadata: " zone=a , tier=gold=1"}).nodeMetadata()
	if err != nil || len(md) != 2 || md["zone"] != "a" || md["tier"] != "gold=1" {
		t.Errorf("metadata %v %v", md, err)
	}
	for _, tc := range []struct {
		x    xdsOptions
		want string
	}{
		{xdsOptions{certFile: "c.pem"}, "--xds-cert-file and --xds-key-file go together"},
		{xdsOptions{caFile: filepath.Join(t.TempDir(), "missing.pem")}, "--xds-ca-file: "},
		{xdsOptions{certFile: "/nonexistent/c.pem", keyFile: "/nonexistent/c.key"}, "--xds-cert-file and --xds-key-file: "},
	} {
		if _, err := tc.x.tlsConfig(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.x, err, tc.want)
		}
	}
	if tc, err := (&xdsOptions{}).tlsConfig(); tc != nil || err != nil {
		t.Errorf("no TLS flag: %v %v, want plaintext", tc, err)
	}
	var errb strings.Builder
	code := runServe(context.Background(), []string{"--xds-server", "127.0.0.1:1", "--xds-node-metadata", "zone"}, io.Discard, &errb)
	if code != 2 || !strings.Contains(errb.String(), `--xds-node-metadata: "zone" is not key=value`) {
		t.Errorf("bad metadata: exit %d %q", code, errb.String())
	}
}
