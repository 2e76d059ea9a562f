package storestack

import (
	"crypto/tls"
	"strings"

	"github.com/sluicehq/sluice/internal/config"
)

// ClientTLS builds a client's TLS configuration from c's files, as for
// store.tls: CAFile replaces the system's roots, CertFile and KeyFile
// present a client certificate. On error, field says which file is at
// fault: "ca_file" or "cert_file" (with its key).
func ClientTLS(c *config.TLS) (tc *tls.Config, field string, err error) {
	tc, field, err = tlsConfig(c)
	return tc, strings.TrimPrefix(field, "store.tls."), err
}
