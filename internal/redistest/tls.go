package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// GenerateTLS writes a fresh self-signed CA and a server certificate signed by
// it (ECDSA P-256, valid for 127.0.0.1 and localhost, server and client auth)
// into dir as PEM files, for WithTLS and for clients that must trust the CA.
// Generating per test avoids checked-in keys that expire.
func GenerateTLS(t testing.TB, dir string) (certFile, keyFile, caFile string) {
	t.Helper()
	fail := func(what string, err error) {
		t.Helper()
		t.Fatalf("redistest: GenerateTLS: %s: %v", what, err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		fail("CA key", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          randSerial(t),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour), // tolerate clock skew
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		fail("CA certificate", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		fail("parse CA certificate", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		fail("server key", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: randSerial(t),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// Client auth too, so the same pair works for replication/cluster links.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		fail("server certificate", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		fail("marshal server key", err)
	}

	certFile = filepath.Join(dir, "server.crt")
	keyFile = filepath.Join(dir, "server.key")
	caFile = filepath.Join(dir, "ca.crt")
	for _, f := range []struct {
		path, typ string
		der       []byte
		mode      os.FileMode
	}{
		{certFile, "CERTIFICATE", der, 0o644},
		{keyFile, "PRIVATE KEY", keyDER, 0o600},
		{caFile, "CERTIFICATE", caDER, 0o644},
	} {
		data := pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der})
		if err := os.WriteFile(f.path, data, f.mode); err != nil {
			fail("write "+f.path, err)
		}
	}
	return certFile, keyFile, caFile
}

// randSerial returns a random 128-bit serial, as RFC 5280 recommends.
func randSerial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		t.Fatalf("redistest: serial number: %v", err)
	}
	return n
}
