package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/testwait"
)

// testCA issues certificates for the TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate for dnsName, signed by the CA, in PEM, with
// its key.
func (ca *testCA) issue(t *testing.T, serial int64, dnsName string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// TestServeGRPCOverTLS: with --grpc-tls-* (ratelimit's GRPC_SERVER_USE_TLS
// and its files) the gRPC port speaks TLS only, requires a client
// certificate from the client CA carrying the configured name, and serves a
// replaced certificate without a restart.
func TestServeGRPCOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	certFile, keyFile, caFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.pem")
	write := func(path string, b []byte) {
		t.Helper()
		// Written aside and renamed, as a secret mount swaps its files.
		if err := os.WriteFile(path+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	serverCert, serverKey := ca.issue(t, 2, "localhost", x509.ExtKeyUsageServerAuth)
	write(certFile, serverCert)
	write(keyFile, serverKey)
	write(caFile, ca.pem)
	envoyCert, envoyKey := ca.issue(t, 3, "envoy.internal", x509.ExtKeyUsageClientAuth)
	otherCert, otherKey := ca.issue(t, 4, "other.internal", x509.ExtKeyUsageClientAuth)

	cfgPath := filepath.Join(dir, "envoy.yaml")
	writeFile(t, cfgPath, envoyConfig)
	log, _ := newLogger(&syncBuffer{}, "text", "info")
	ctx, cancel := context.WithCancel(context.Background())
	o := serveOptions{configs: cli.StringList{cfgPath}, httpAddr: "127.0.0.1:0", grpcAddr: "127.0.0.1:0", shutdown: waitLimit,
		rl: ratelimitOptions{grpcTLS: grpcTLSOptions{certFile: certFile, keyFile: keyFile, clientCAFile: caFile, clientSAN: "envoy.internal"}}}
	srv, err := startServer(ctx, o, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.wait() })

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.pem)
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*commonv3.RateLimitDescriptor{
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}}}}
	// call makes one request with creds.
	call := func(creds credentials.TransportCredentials) error {
		conn, err := grpc.NewClient(srv.grpcAddr.String(), grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer rcancel()
		_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(rctx, req)
		return err
	}
	clientTLS := func(certPEM, keyPEM []byte, seen *big.Int) credentials.TransportCredentials {
		tc := &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12,
			VerifyConnection: func(cs tls.ConnectionState) error { seen.Set(cs.PeerCertificates[0].SerialNumber); return nil }}
		if certPEM != nil {
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{pair}
		}
		return credentials.NewTLS(tc)
	}
	seen := new(big.Int)
	if err := call(clientTLS(envoyCert, envoyKey, seen)); err != nil || seen.Int64() != 2 {
		t.Fatalf("mutual TLS with the right name: %v (server certificate %v)", err, seen)
	}
	for name, creds := range map[string]credentials.TransportCredentials{
		"plaintext":                insecure.NewCredentials(),
		"no client certificate":    clientTLS(nil, nil, new(big.Int)),
		"another name on the CA's": clientTLS(otherCert, otherKey, new(big.Int)),
	} {
		if err := call(creds); err == nil {
			t.Errorf("%s: answered", name)
		}
	}
	// A new certificate in the files is served without a restart.
	newCert, newKey := ca.issue(t, 5, "localhost", x509.ExtKeyUsageServerAuth)
	write(keyFile, newKey)
	write(certFile, newCert)
	testwait.UntilSaw(t, "the replaced certificate served", func() (bool, string) {
		if err := call(clientTLS(envoyCert, envoyKey, seen)); err != nil {
			t.Fatalf("after the replacement: %v", err)
		}
		return seen.Int64() == 5, fmt.Sprint("certificate ", seen.Int64())
	})
}

// TestGRPCTLSOptionErrors: TLS flags that cannot go together stop serve
// with the flags named.
func TestGRPCTLSOptionErrors(t *testing.T) {
	for _, g := range []grpcTLSOptions{
		{certFile: "c.pem"},
		{clientCAFile: "ca.pem"},
		{certFile: "c.pem", keyFile: "k.pem", clientSAN: "envoy"},
		{certFile: "/nonexistent/c.pem", keyFile: "/nonexistent/k.pem"},
	} {
		if opt, err := g.serverOption(nil); err == nil || opt != nil {
			t.Errorf("%+v: %v, want an error", g, err)
		}
	}
}
