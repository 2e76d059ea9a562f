package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// grpcTLSOptions are serve's flags for serving gRPC over TLS.
type grpcTLSOptions struct {
	certFile, keyFile string // the server's certificate chain and key
	clientCAFile      string // roots verifying client certificates: mutual TLS
	clientSAN         string // a name every client certificate must carry
}

func (g *grpcTLSOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&g.certFile, "grpc-tls-cert-file", "", "PEM `file` of the gRPC port's certificate chain, with --grpc-tls-key-file: serve gRPC over TLS (reread when it changes)")
	fs.StringVar(&g.keyFile, "grpc-tls-key-file", "", "PEM `file` of the gRPC certificate's key")
	fs.StringVar(&g.clientCAFile, "grpc-tls-client-ca-file", "", "PEM `file` of the roots that verify client certificates: with it every gRPC client must present one (mutual TLS)")
	fs.StringVar(&g.clientSAN, "grpc-tls-client-san", "", "a `name` (DNS, URI, IP or e-mail) every client certificate must carry, with --grpc-tls-client-ca-file")
}

// grpcTLS maps ratelimit's GRPC_SERVER_USE_TLS and its files to the flags'
// defaults.
func (e *ratelimitEnv) grpcTLS() {
	v, ok := e.lookup("GRPC_SERVER_USE_TLS")
	if !ok {
		return
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		e.set("grpc-tls-cert-file", "GRPC_SERVER_USE_TLS", "", fmt.Sprintf("GRPC_SERVER_USE_TLS=%q: want true or false", v))
		return
	}
	if !on {
		return
	}
	get := func(name string) string { s, _ := e.lookup(name); return s }
	problem := ""
	if get("GRPC_SERVER_TLS_CERT") == "" || get("GRPC_SERVER_TLS_KEY") == "" {
		problem = "GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY"
	}
	e.set("grpc-tls-cert-file", "GRPC_SERVER_TLS_CERT", get("GRPC_SERVER_TLS_CERT"), problem)
	e.set("grpc-tls-key-file", "GRPC_SERVER_TLS_KEY", get("GRPC_SERVER_TLS_KEY"), "")
	e.set("grpc-tls-client-ca-file", "GRPC_CLIENT_TLS_CACERT", get("GRPC_CLIENT_TLS_CACERT"), "")
	e.set("grpc-tls-client-san", "GRPC_CLIENT_TLS_SAN", get("GRPC_CLIENT_TLS_SAN"), "")
}

// on reports whether gRPC is served over TLS.
func (g *grpcTLSOptions) on() bool { return g.certFile != "" || g.keyFile != "" }

// serverOption is the gRPC server's transport credentials; nil for
// plaintext. The certificate is read now, so that a missing or broken file
// stops the start, and read again whenever its files change (a rotated
// certificate is served without a restart).
func (g *grpcTLSOptions) serverOption(log *slog.Logger) (grpc.ServerOption, error) {
	if !g.on() {
		if g.clientCAFile != "" || g.clientSAN != "" {
			return nil, errors.New("--grpc-tls-client-ca-file and --grpc-tls-client-san need --grpc-tls-cert-file and --grpc-tls-key-file")
		}
		return nil, nil
	}
	if g.certFile == "" || g.keyFile == "" {
		return nil, errors.New("--grpc-tls-cert-file and --grpc-tls-key-file go together")
	}
	if g.clientSAN != "" && g.clientCAFile == "" {
		return nil, errors.New("--grpc-tls-client-san needs --grpc-tls-client-ca-file")
	}
	certs := &certReloader{certFile: g.certFile, keyFile: g.keyFile, log: log}
	if err := certs.load(); err != nil {
		return nil, fmt.Errorf("--grpc-tls-cert-file, --grpc-tls-key-file: %w", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.get}
	if g.clientCAFile != "" {
		pem, err := os.ReadFile(g.clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--grpc-tls-client-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--grpc-tls-client-ca-file: %s holds no PEM certificate", g.clientCAFile)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	if san := g.clientSAN; san != "" {
		tc.VerifyPeerCertificate = func(_ [][]byte, chains [][]*x509.Certificate) error {
			if len(chains) > 0 && len(chains[0]) > 0 && hasName(chains[0][0], san) {
				return nil
			}
			return fmt.Errorf("the client certificate does not carry the name %q", san)
		}
	}
	return grpc.Creds(credentials.NewTLS(tc)), nil
}

// hasName reports whether cert carries name among its subject alternative
// names.
func hasName(cert *x509.Certificate, name string) bool {
	if slices.Contains(cert.DNSNames, name) || slices.Contains(cert.EmailAddresses, name) {
		return true
	}
	for _, ip := range cert.IPAddresses {
		if ip.String() == name {
			return true
		}
	}
	for _, u := range cert.URIs {
		if u.String() == name {
			return true
		}
	}
	return false
}

// certReloader serves a key pair from files, read again on a handshake
// after either file changed (size or modification time), at most once a
// second. A pair that fails to load is logged and the previous one kept.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string // the files' sizes and modification times when read
	checked time.Time
}

// stampOf describes the files' state, to tell when they changed.
func (c *certReloader) stampOf() string {
	s := ""
	for _, f := range []string{c.certFile, c.keyFile} {
		if fi, err := os.Stat(f); err == nil {
			s += fmt.Sprint(fi.Size(), fi.ModTime().UnixNano(), ";")
		}
	}
	return s
}

func (c *certReloader) load() error {
	stamp := c.stampOf()
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return err
	}
	c.cert, c.stamp = &cert, stamp
	return nil
}

func (c *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); now.Sub(c.checked) >= time.Second {
		c.checked = now
		if c.stampOf() != c.stamp {
			if err := c.load(); err != nil {
				c.stamp = c.stampOf() // logged once per change
				c.log.Warn("gRPC TLS: cannot read the changed certificate; serving the previous one", "error", err)
			} else {
				c.log.Info("gRPC TLS: certificate reloaded", "cert_file", c.certFile)
			}
		}
	}
	return c.cert, nil
}
