// Package xdsconfig receives Sluice's rate limit configuration from an xDS
// management server, as envoyproxy/ratelimit's xDS provider does (the one
// Envoy Gateway drives): an ADS stream, state of the world, subscribed to
// ratelimit.config.ratelimit.v3.RateLimitConfig resources, one per domain.
//
// Each version the server sends is converted (Convert) and handed to an
// apply function; it is ACKed when applied and NACKed, with the reason in
// error_detail, when it does not convert or apply, and the configuration in
// force then stays as it was. A version past the Limits is NACKed as soon as
// it is read, before anything is built of it. A lost stream is opened again after a jittered
// exponential backoff, resubscribing with the last version applied.
package xdsconfig

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/reconnect"
)

// Backoff bounds between attempts to reach the management server: the wait
// doubles from MinBackoff to MaxBackoff, each one drawn at random from its
// upper half so that many nodes restarted together do not reconnect in step.
const (
	MinBackoff = 250 * time.Millisecond
	MaxBackoff = 30 * time.Second
)

// repeatNACKDelay is how long a version rejected already is held before
// rejecting it again. A control plane answers a NACK by sending what it has,
// which is the same version until it is fixed: without a pause, the two
// would trade it in a tight loop.
const repeatNACKDelay = time.Second

// maxErrorDetail bounds the reason sent with a NACK.
const maxErrorDetail = 16 << 10

// MaxMessageSize bounds one response: every domain comes in one message
// (state of the world), and gRPC's default of 4 MiB is the size of one
// configuration file.
const MaxMessageSize = 64 << 20

// Options configures a Client.
type Options struct {
	// Server is the management server's gRPC target, such as
	// "xds.example:18000".
	Server string
	// NodeID identifies this node to the server, which picks the
	// configuration by it (envoyproxy/ratelimit's CONFIG_GRPC_XDS_NODE_ID).
	NodeID string
	// NodeMetadata is sent as the node's metadata, as string values.
	NodeMetadata map[string]string
	// Apply puts a converted configuration in force; an error rejects the
	// version, and Apply must then leave the configuration in force as it was.
	Apply func(*config.Config) error
	// TLS, when set, secures the connection; nil is plaintext.
	TLS *tls.Config
	// Logger logs updates and connection problems; nil is slog.Default().
	Logger *slog.Logger
	// Registerer, when set, gets the client's metrics:
	// sluice_xds_updates_total and sluice_xds_connected.
	Registerer prometheus.Registerer
	// Limits bound what one version may cost; past them it is rejected
	// before it is built. Zero fields take the defaults.
	Limits Limits
}

// Client subscribes to RateLimitConfig resources; Run drives it.
type Client struct {
	o       Options
	log     *slog.Logger
	node    *core.Node
	metrics *metrics

	accepted string // the last version applied, sent when resubscribing
	rejected string // the last version rejected, to pace repeats

	applied     chan struct{} // closed once a version is applied
	appliedOnce sync.Once
}

// New checks o and returns a Client.
func New(o Options) (*Client, error) {
	if o.Server == "" {
		return nil, errors.New("xdsconfig: no server address")
	}
	if o.Apply == nil {
		return nil, errors.New("xdsconfig: no Apply function")
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("xdsconfig: %w", err)
	}
	c := &Client{o: o, log: o.Logger, metrics: m, applied: make(chan struct{})}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.log = c.log.With("xds_server", o.Server)
	c.node = &core.Node{Id: o.NodeID}
	if len(o.NodeMetadata) > 0 {
		fields := make(map[string]*structpb.Value, len(o.NodeMetadata))
		for k, v := range o.NodeMetadata {
			fields[k] = structpb.NewStringValue(v)
		}
		c.node.Metadata = &structpb.Struct{Fields: fields}
	}
	return c, nil
}

// Applied is closed once a version from the server is in force; until then
// only the configuration the server does not provide decides.
func (c *Client) Applied() <-chan struct{} { return c.applied }

// Run subscribes and applies every version the server sends until ctx ends,
// reconnecting whenever the stream is lost.
func (c *Client) Run(ctx context.Context) {
	backoff := reconnect.Backoff(MinBackoff, MaxBackoff)
	for ctx.Err() == nil {
		received, err := c.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		if received {
			backoff.Reset() // the server was there: start the backoff afresh
		}
		wait := backoff.NextBackOff()
		c.log.Warn("xDS stream lost; reconnecting", "error", err, "retry_in", wait.Round(time.Millisecond))
		if !reconnect.Sleep(ctx, wait) {
			return
		}
	}
}

// stream runs one ADS stream until it fails; received reports whether the
// server sent anything on it.
func (c *Client) stream(ctx context.Context) (received bool, err error) {
	creds := insecure.NewCredentials()
	if c.o.TLS != nil {
		creds = credentials.NewTLS(c.o.TLS)
	}
	conn, err := grpc.NewClient(c.o.Server, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize)))
	if err != nil {
		return false, err
	}
	defer conn.Close()
	defer c.metrics.connected.Set(0)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ads, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return false, err
	}
	// The version already applied tells the server what this node has.
	if err := ads.Send(c.request(c.accepted, "", nil)); err != nil {
		return false, err
	}
	for {
		resp, err := ads.Recv()
		if err != nil {
			return received, err
		}
		if !received {
			c.log.Info("xDS stream open", "node_id", c.o.NodeID)
			c.metrics.connected.Set(1)
		}
		received = true
		if resp.GetTypeUrl() != TypeURL {
			continue // not subscribed to: nothing to answer
		}
		req := c.handle(ctx, resp)
		if req == nil {
			return received, ctx.Err()
		}
		if err := ads.Send(req); err != nil {
			return received, err
		}
	}
}

// handle applies one response and returns its ACK or NACK; nil when ctx
// ended while a repeated NACK was held.
func (c *Client) handle(ctx context.Context, resp *discovery.DiscoveryResponse) *discovery.DiscoveryRequest {
	version := resp.GetVersionInfo()
	cfg, err := Convert(resp.GetResources(), c.o.Limits)
	if err == nil {
		err = c.o.Apply(cfg)
	}
	if err == nil {
		c.accepted, c.rejected = version, ""
		c.appliedOnce.Do(func() { close(c.applied) })
		c.metrics.updates.WithLabelValues("accepted").Inc()
		c.log.Info("xDS configuration applied", "version", version, "resources", len(resp.GetResources()),
			"domains", len(cfg.Domains), "policies", len(cfg.Policies))
		return c.request(version, resp.GetNonce(), nil)
	}
	if version == c.rejected && !reconnect.Sleep(ctx, repeatNACKDelay) {
		return nil
	}
	c.rejected = version
	c.metrics.updates.WithLabelValues("rejected").Inc()
	c.log.Error("xDS configuration rejected; the configuration in force stays", "version", version,
		"in_force", c.accepted, "error", err)
	detail := err.Error()
	if len(detail) > maxErrorDetail {
		detail = detail[:maxErrorDetail] + "…"
	}
	return c.request(c.accepted, resp.GetNonce(), &status.Status{Code: int32(codes.InvalidArgument), Message: detail})
}

// request is a subscription request: an ACK of version when nonce is set
// and detail nil, a NACK when detail is set.
func (c *Client) request(version, nonce string, detail *status.Status) *discovery.DiscoveryRequest {
	return &discovery.DiscoveryRequest{
		VersionInfo:   version,
		Node:          c.node,
		TypeUrl:       TypeURL,
		ResponseNonce: nonce,
		ErrorDetail:   detail,
	}
}
