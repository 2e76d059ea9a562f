package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/sluicehq/sluice/internal/connlimit"
	"github.com/sluicehq/sluice/internal/rlqs"
)

// The health reserve: slots on a port with health checks, beyond its caps,
// for connections the caps refuse. Each answers one health check within
// healthReserveLife and is closed. A probe sharing a flooding client's
// address (a kubelet behind the node's address, say) is answered through it.
const (
	healthReserve     = 32
	healthReserveLife = 5 * time.Second
)

// healthPaths are the HTTP paths a reserved connection may ask for.
var healthPaths = map[string]bool{"/healthz": true, "/readyz": true, "/readyz/store": true, "/healthcheck": true}

// listenSpec is a port to open: the flag naming it, for errors, and its
// address ("" for a port turned off).
type listenSpec struct{ flag, addr string }

// listenAll opens every port, or none: on an error the ones already open are
// closed. A port turned off gets a nil listener.
func listenAll(specs ...listenSpec) ([]net.Listener, error) {
	lns := make([]net.Listener, len(specs))
	for i, sp := range specs {
		if sp.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", sp.addr)
		if err != nil {
			for _, open := range lns[:i] {
				if open != nil {
					open.Close()
				}
			}
			return nil, fmt.Errorf("%s: %w", sp.flag, err)
		}
		lns[i] = ln
	}
	return lns, nil
}

// ports serves serve's and proxy's listeners within l's limits, each capped
// and counted in metrics labelled with its name.
type ports struct {
	limits  *connLimits
	reg     prometheus.Registerer
	log     *slog.Logger
	servers []*http.Server
	wg      sync.WaitGroup
}

// portKind is what a port serves, which decides its health reserve.
type portKind int

const (
	plainPort  portKind = iota // no health checks: no reserve
	healthPort                 // health checks among other paths: reserved connections answer them alone
)

// serveHTTP serves h on ln until the server is shut down (see servers).
func (p *ports) serveHTTP(name string, ln net.Listener, h http.Handler, kind portKind) {
	l := p.limits
	var opts []connlimit.Option
	if kind == healthPort {
		opts = append(opts, connlimit.WithReserve(healthReserve, healthReserveLife))
		h = healthOnlyIfReserved{h}
	}
	read := l.httpRead
	if read == 0 && name != "http" {
		read = l.httpReadHeader // a port of small requests, never uploads
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.httpReadHeader,
		ReadTimeout:       read,
		IdleTimeout:       l.httpIdle,
		MaxHeaderBytes:    l.httpMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
		ConnState:         connlimit.ConnState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if connlimit.IsReserved(c) {
				return context.WithValue(ctx, reservedConn{}, true)
			}
			return ctx
		},
	}
	p.servers = append(p.servers, srv)
	capped := p.capped(ln, name, l.httpMaxConns, append(opts, connlimit.WithPerAddress(l.httpMaxConnsPerIP))...)
	p.wg.Go(func() {
		if err := srv.Serve(capped); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("HTTP server stopped", "listener", name, "error", err)
		}
	})
}

// serveGRPC serves srv on ln, with the health reserve, until srv stops.
func (p *ports) serveGRPC(ln net.Listener, srv *grpc.Server) {
	l := p.limits
	capped := p.capped(ln, "grpc", l.grpcMaxConns, connlimit.WithPerAddress(l.grpcMaxConnsPerIP),
		connlimit.WithReserve(healthReserve, healthReserveLife))
	p.wg.Go(func() {
		if err := srv.Serve(capped); err != nil {
			p.log.Error("gRPC server stopped", "error", err)
		}
	})
}

// wait blocks until every server has stopped serving.
func (p *ports) wait() { p.wg.Wait() }

// capped wraps ln in the caps and exports its counts as metrics labelled
// with the listener's name.
func (p *ports) capped(ln net.Listener, name string, max int, opts ...connlimit.Option) *connlimit.Listener {
	cl := connlimit.New(ln, max, opts...)
	counter := func(metric, help string, v func(connlimit.Stats) int64, labels ...string) prometheus.Collector {
		constLabels := prometheus.Labels{"listener": name}
		for i := 0; i+1 < len(labels); i += 2 {
			constLabels[labels[i]] = labels[i+1]
		}
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: metric, Help: help, ConstLabels: constLabels},
			func() float64 { return float64(v(cl.Stats())) })
	}
	const refusedHelp = "Connections closed on accept: the listener's cap (reason cap: --http-max-conns, --grpc-max-conns) or the client address's (reason per_ip: --http-max-conns-per-ip, --grpc-max-conns-per-ip) was reached, and the health reserve was full or not for this listener."
	p.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_connections_open", ConstLabels: prometheus.Labels{"listener": name},
			Help: "Connections open on a listener (http, grpc, health, admin or debug), reserved ones apart.",
		}, func() float64 { return float64(cl.Open()) }),
		counter("sluice_connections_refused_total", refusedHelp, func(s connlimit.Stats) int64 { return s.RefusedCap }, "reason", "cap"),
		counter("sluice_connections_refused_total", refusedHelp, func(s connlimit.Stats) int64 { return s.RefusedPerAddress }, "reason", "per_ip"),
		counter("sluice_connections_shed_total",
			"Connections closed at the listener's cap to make room for a client address holding at least two fewer: the least recently active of the address holding the most.",
			func(s connlimit.Stats) int64 { return s.Shed }),
		counter("sluice_connections_reserved_total",
			"Connections over a cap accepted into the listener's health reserve, where only health checks are answered.",
			func(s connlimit.Stats) int64 { return s.ReservedTotal }),
	)
	return cl
}

// reservedConn marks the context of a request on a reserved connection.
type reservedConn struct{}

// healthOnlyIfReserved answers a request on a reserved connection only if it
// asks for a health check, and closes the connection after it: the others
// get 503 and may retry on a new connection, or another node.
type healthOnlyIfReserved struct{ next http.Handler }

func (h healthOnlyIfReserved) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Context().Value(reservedConn{}) == nil {
		h.next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Connection", "close")
	if healthPaths[r.URL.Path] && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		h.next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintln(w, `{"error":{"code":"too_many_connections","message":"this port, or your address, holds all the connections it may: only health checks are answered on this connection"}}`)
}

// tapStream runs as each gRPC stream opens: on a reserved connection only
// health checks are answered; every RPC but a health watch and a rate
// limit quota stream (which has --rlqs-first-report-timeout instead) gets
// --grpc-rpc-timeout to finish, its request included, so that a client
// sending a request slowly or never cannot hold a stream.
func (l *connLimits) tapStream(ctx context.Context, info *tap.Info) (context.Context, error) {
	if pr, ok := peer.FromContext(ctx); ok && connlimit.IsReservedAddr(pr.Addr) && info.FullMethodName != healthpb.Health_Check_FullMethodName {
		return nil, status.Error(codes.Unavailable, "too many connections from your address or on this port: only health checks are answered on this connection")
	}
	if l.grpcRPCTimeout <= 0 || info.FullMethodName == healthpb.Health_Watch_FullMethodName || info.FullMethodName == rlqs.StreamMethod {
		return ctx, nil
	}
	// Envoy sends its own, shorter timeout (grpc-timeout) with every call:
	// nothing to add then, and nothing to allocate.
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= l.grpcRPCTimeout {
		return ctx, nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.grpcRPCTimeout)
	_ = cancel // the stream's end cancels the parent context, and this one with it
	return ctx, nil
}
