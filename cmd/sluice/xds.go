package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/xdsconfig"
)

// xdsOptions are serve's flags for the xDS configuration source.
type xdsOptions struct {
	server   string
	nodeID   string
	metadata string // key=value,key=value

	tls                       bool
	caFile, certFile, keyFile string
	serverName                string

	wait time.Duration // /readyz waits this long for the first version; 0: not at all

	maxBytes int64 // of a version's decoded form (xdsconfig.Limits.Bytes)
}

// addFlags defines the flags on fs. Their defaults come from
// envoyproxy/ratelimit's variables when it is configured for xDS
// (CONFIG_TYPE=GRPC_XDS_SOTW), so that its manifests work unchanged.
func (x *xdsOptions) addFlags(fs *flag.FlagSet, getenv func(string) string) {
	server, nodeID, metadata := "", "default", ""
	var def xdsOptions
	if getenv("CONFIG_TYPE") == "GRPC_XDS_SOTW" {
		server, metadata = getenv("CONFIG_GRPC_XDS_SERVER_URL"), getenv("CONFIG_GRPC_XDS_NODE_METADATA")
		if id := getenv("CONFIG_GRPC_XDS_NODE_ID"); id != "" {
			nodeID = id
		}
		def.tls, _ = strconv.ParseBool(getenv("CONFIG_GRPC_XDS_SERVER_USE_TLS"))
		def.caFile, def.serverName = getenv("CONFIG_GRPC_XDS_SERVER_TLS_CACERT"), getenv("CONFIG_GRPC_XDS_SERVER_TLS_SAN")
		def.certFile, def.keyFile = getenv("CONFIG_GRPC_XDS_CLIENT_TLS_CERT"), getenv("CONFIG_GRPC_XDS_CLIENT_TLS_KEY")
	}
	fs.StringVar(&x.server, "xds-server", server, "the xDS management server (`host:port`) to take rate limit domains from (RateLimitConfig resources, as envoyproxy/ratelimit with CONFIG_TYPE=GRPC_XDS_SOTW); empty: none")
	fs.StringVar(&x.nodeID, "xds-node-id", nodeID, "the node `id` this instance gives the xDS server, which picks the configuration by it")
	fs.StringVar(&x.metadata, "xds-node-metadata", metadata, "node metadata for the xDS server, as `key=value,key=value`")
	fs.BoolVar(&x.tls, "xds-tls", def.tls, "connect to the xDS server over TLS (implied by the other --xds-*-file flags)")
	fs.StringVar(&x.caFile, "xds-ca-file", def.caFile, "PEM `file` of the roots that verify the xDS server (default: the system's)")
	fs.StringVar(&x.certFile, "xds-cert-file", def.certFile, "PEM `file` of a client certificate for the xDS server, with --xds-key-file")
	fs.StringVar(&x.keyFile, "xds-key-file", def.keyFile, "PEM `file` of the client certificate's key")
	fs.StringVar(&x.serverName, "xds-server-name", def.serverName, "the `name` to verify the xDS server's certificate against (default: the host of --xds-server)")
	fs.Int64Var(&x.maxBytes, "xds-max-bytes", xdsconfig.DefaultMaxBytes, "the most `bytes` one version from the xDS server may take decoded (about 1 KB a descriptor, plus its key and value); past it the version is NACKed")
	fs.DurationVar(&x.wait, "xds-wait", 30*time.Second, "with --xds-server: how long /readyz answers 503 and gRPC health NOT_SERVING waiting for the first configuration from it, before reporting ready without it (0: no wait)")
}

// tlsConfig is the connection's TLS configuration; nil for plaintext.
func (x *xdsOptions) tlsConfig() (*tls.Config, error) {
	if !x.tls && x.caFile == "" && x.certFile == "" && x.keyFile == "" {
		return nil, nil
	}
	if (x.certFile == "") != (x.keyFile == "") {
		return nil, errors.New("--xds-cert-file and --xds-key-file go together")
	}
	tc, field, err := storestack.ClientTLS(&config.TLS{CAFile: x.caFile, CertFile: x.certFile, KeyFile: x.keyFile, ServerName: x.serverName})
	if err != nil {
		flagName := map[string]string{"ca_file": "--xds-ca-file", "cert_file": "--xds-cert-file and --xds-key-file"}[field]
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	return tc, nil
}

// nodeMetadata parses --xds-node-metadata.
func (x *xdsOptions) nodeMetadata() (map[string]string, error) {
	if strings.TrimSpace(x.metadata) == "" {
		return nil, nil
	}
	md := map[string]string{}
	for _, item := range strings.Split(x.metadata, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--xds-node-metadata: %q is not key=value", item)
		}
		md[k] = v
	}
	return md, nil
}

// client returns the xDS client that applies to svc versions within lim, or
// nil without --xds-server.
func (x *xdsOptions) client(svc *service.Service, lim config.Limits, log *slog.Logger) (*xdsconfig.Client, error) {
	if x.server == "" {
		return nil, nil
	}
	md, err := x.nodeMetadata()
	if err != nil {
		return nil, err
	}
	tc, err := x.tlsConfig()
	if err != nil {
		return nil, err
	}
	return xdsconfig.New(xdsconfig.Options{Server: x.server, NodeID: x.nodeID, NodeMetadata: md, TLS: tc,
		Apply: svc.ApplyDynamic, Logger: log, Registerer: svc.Registry(),
		Limits: xdsconfig.Limits{Descriptors: lim.Descriptors, Depth: lim.Depth, Bytes: x.maxBytes}})
}

// waitingFor returns what readiness still waits for: the first version from
// the xDS server c, until it is applied or x.wait has passed (then "",
// logged), so that a node takes no traffic before it knows the xDS domains'
// limits — envoyproxy/ratelimit holds its start-up for it likewise. Always
// "" without a client or a wait; the wait ends with ctx. serving hears the
// same (serve's gRPC health): false at once if there is a wait, true when
// it ends, and nothing once ctx has ended (the drain takes over then).
func (x *xdsOptions) waitingFor(ctx context.Context, c *xdsconfig.Client, log *slog.Logger, serving func(bool)) func() string {
	if c == nil || x.wait <= 0 {
		return func() string { return "" }
	}
	var waiting atomic.Bool
	waiting.Store(true)
	serving(false)
	go func() {
		defer waiting.Store(false)
		timer := time.NewTimer(x.wait)
		defer timer.Stop()
		select {
		case <-c.Applied():
		case <-timer.C:
			log.Warn("no configuration from the xDS server within --xds-wait: ready without it", "xds_wait", x.wait)
		case <-ctx.Done():
			return
		}
		serving(true)
	}()
	return func() string {
		if waiting.Load() {
			return "the first configuration from the xDS server"
		}
		return ""
	}
}

// runXDS runs c, when there is one, until ctx ends.
func runXDS(ctx context.Context, c *xdsconfig.Client) {
	if c != nil {
		c.Run(ctx)
	}
}

// loadFiles is loadConfig, except that with no files, which serve allows
// when xDS provides the domains, it is an empty configuration.
func loadFiles(paths []string, store storeFlags, lim config.Limits) (*config.Config, error) {
	if len(paths) > 0 {
		return loadConfig(paths, store, lim)
	}
	cfg, err := config.ParseDocuments()
	if err != nil {
		return nil, err
	}
	if err := storestack.Check(cfg, store.section(cfg)); err != nil {
		return nil, err
	}
	return cfg, nil
}
