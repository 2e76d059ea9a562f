package grpclimit

import (
	"context"
	"net"
	"net/netip"
	"strings"

	"github.com/sluicehq/sluice/internal/limitcore"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// Key tells a limit which bucket a call is counted in. Build one with ByPeer,
// ByMetadata, ByMethod, ByFunc, Global or Keys. A call for which a Key yields
// the empty string has no key; see Limit.
type Key struct {
	get limitcore.KeyFunc[*call]
}

// call is one RPC as the keys see it.
type call struct {
	ctx    context.Context
	method string
	in     *Interceptor
	outcome
}

// ByPeer keys calls by the peer's IP address: IPv4 as it is, IPv6 by its /64
// (see WithIPv6Prefix). A peer that is not an IP address (a Unix socket) has no key.
// Behind a proxy every call comes from the proxy; key by something the proxy
// vouches for instead (ByFunc), as a client can write any metadata itself.
func ByPeer() Key {
	return Key{get: func(c *call) (string, error) {
		p, ok := peer.FromContext(c.ctx)
		if !ok || p.Addr == nil {
			return "", nil
		}
		var a netip.Addr
		if tcp, ok := p.Addr.(*net.TCPAddr); ok {
			a = tcp.AddrPort().Addr()
		} else if ap, err := netip.ParseAddrPort(p.Addr.String()); err == nil {
			a = ap.Addr()
		}
		if !a.IsValid() {
			return "", nil
		}
		return limitcore.IPKey(a.Unmap().WithZone(""), c.in.cfg.V6Bits), nil
	}}
}

// ByMetadata keys calls by the first value of the request metadata name, such
// as "x-api-key". A call without it, or with an empty value, has no key.
func ByMetadata(name string) Key {
	name = strings.ToLower(name)
	return Key{get: func(c *call) (string, error) {
		if v := metadata.ValueFromIncomingContext(c.ctx, name); len(v) > 0 {
			return v[0], nil
		}
		return "", nil
	}}
}

// ByMethod keys calls by their full method name, "/package.Service/Method",
// for a limit per method.
func ByMethod() Key {
	return Key{get: func(c *call) (string, error) { return c.method, nil }}
}

// ByFunc keys calls by what f returns: "" when the call has no key; an error
// fails the call (see WithErrorHandler).
func ByFunc(f func(ctx context.Context, fullMethod string) (string, error)) Key {
	return Key{get: func(c *call) (string, error) { return f(c.ctx, c.method) }}
}

// Global puts every call in one bucket, for a limit on the whole server.
func Global() Key {
	return Key{get: func(*call) (string, error) { return "global", nil }}
}

// Keys combines several keys into one, joined unambiguously: a call is
// counted per distinct combination, e.g. Keys(ByMetadata("x-api-key"),
// ByMethod()) per client and method. A call that lacks any part has no key.
func Keys(keys ...Key) Key {
	parts := make([]limitcore.KeyFunc[*call], len(keys))
	for i, k := range keys {
		parts[i] = k.get
	}
	return Key{get: limitcore.Join(parts...)}
}
