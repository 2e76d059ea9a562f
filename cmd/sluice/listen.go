package main

import (
	"flag"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// connLimits bound what clients can hold on the two ports: connections,
// streams, and how long a connection may stall or idle. Without them 17.7k
// idle HTTP/2 connections took a server to 385 MB and its health probes to
// 12 s. Zero durations and counts mean "no limit", except where noted.
type connLimits struct {
	grpcMaxConns       int           // open gRPC connections; more are closed at once
	grpcMaxConnsPerIP  int           // open gRPC connections from one client address
	grpcRPCTimeout     time.Duration // an RPC (request included) still running after this long is cancelled
	grpcMaxStreams     int           // concurrent RPCs per gRPC connection
	grpcHandshake      time.Duration // to finish the HTTP/2 handshake (must be > 0)
	grpcIdle           time.Duration // a connection without RPCs for this long gets GOAWAY
	grpcMaxAge         time.Duration // any connection is asked to reconnect after this long (±10%)
	grpcMaxAgeGrace    time.Duration // then has this long to finish its RPCs
	grpcKeepaliveMin   time.Duration // clients pinging more often are disconnected
	grpcKeepaliveTime  time.Duration // the server pings a connection silent for this long
	httpMaxConns       int           // open HTTP connections; more are closed at once
	httpMaxConnsPerIP  int           // open HTTP connections from one client address
	httpMinBodyRate    int           // proxy: bytes per second a request body must average (0: none)
	httpReadHeader     time.Duration // to send a request's headers (and the first request)
	httpRead           time.Duration // to send a whole request, body included
	httpIdle           time.Duration // a kept-alive connection idle for this long is closed
	httpMaxHeaderBytes int           // request line and headers
}

// keepaliveTimeout is how long a server ping may go unanswered before the
// connection is closed as dead.
const keepaliveTimeout = 20 * time.Second

// defaultConnLimits are the documented defaults (docs/service.md).
func defaultConnLimits() connLimits {
	return connLimits{
		grpcMaxConns:       4096,
		grpcMaxConnsPerIP:  1024,
		grpcRPCTimeout:     30 * time.Second,
		grpcMaxStreams:     1000,
		grpcHandshake:      5 * time.Second,
		grpcIdle:           5 * time.Minute,
		grpcMaxAge:         30 * time.Minute,
		grpcMaxAgeGrace:    30 * time.Second,
		grpcKeepaliveMin:   10 * time.Second,
		grpcKeepaliveTime:  2 * time.Minute,
		httpMaxConns:       4096,
		httpMaxConnsPerIP:  1024,
		httpReadHeader:     10 * time.Second,
		httpRead:           30 * time.Second,
		httpIdle:           2 * time.Minute,
		httpMaxHeaderBytes: 64 << 10,
	}
}

// addFlags registers the limits as serve's flags, with l's values as defaults.
func (l *connLimits) addFlags(fs *flag.FlagSet) {
	l.addGRPCFlags(fs)
	l.addHTTPFlags(fs)
}

// addGRPCFlags registers the gRPC port's limits.
func (l *connLimits) addGRPCFlags(fs *flag.FlagSet) {
	fs.IntVar(&l.grpcMaxConns, "grpc-max-conns", l.grpcMaxConns, "gRPC: open connections at most; at the cap the client address holding the most sheds one, else the new one is closed (0: no cap)")
	fs.IntVar(&l.grpcMaxConnsPerIP, "grpc-max-conns-per-ip", l.grpcMaxConnsPerIP, "gRPC: open connections from one client address at most; more are closed on accept (0: no cap)")
	fs.DurationVar(&l.grpcRPCTimeout, "grpc-rpc-timeout", l.grpcRPCTimeout, "gRPC: cancel an RPC still running after this long, a request sent too slowly included (0: no limit)")
	fs.IntVar(&l.grpcMaxStreams, "grpc-max-streams", l.grpcMaxStreams, "gRPC: concurrent RPCs per connection (HTTP/2 MAX_CONCURRENT_STREAMS; 0: no cap)")
	fs.DurationVar(&l.grpcHandshake, "grpc-handshake-timeout", l.grpcHandshake, "gRPC: time a new connection has to finish the HTTP/2 handshake")
	fs.DurationVar(&l.grpcIdle, "grpc-idle-timeout", l.grpcIdle, "gRPC: close a connection without RPCs for this long (0: never)")
	fs.DurationVar(&l.grpcMaxAge, "grpc-max-conn-age", l.grpcMaxAge, "gRPC: ask a connection to reconnect after this long, ±10%, to rebalance clients (0: never)")
	fs.DurationVar(&l.grpcMaxAgeGrace, "grpc-max-conn-age-grace", l.grpcMaxAgeGrace, "gRPC: time a connection past its age has to finish its RPCs (0: no limit)")
	fs.DurationVar(&l.grpcKeepaliveMin, "grpc-keepalive-min-time", l.grpcKeepaliveMin, "gRPC: disconnect clients that send keepalive pings more often than this")
	fs.DurationVar(&l.grpcKeepaliveTime, "grpc-keepalive-time", l.grpcKeepaliveTime, "gRPC: ping a connection silent for this long, and close it if the ping goes unanswered for 20s")
}

// addHTTPFlags registers the HTTP port's limits, serve's and proxy's. A
// default --http-read-timeout of 0 (proxy's) means none.
func (l *connLimits) addHTTPFlags(fs *flag.FlagSet) {
	readUsage := "HTTP: time a client has to send a whole request"
	if l.httpRead == 0 {
		readUsage += ", body included (0: no limit, so that long uploads are not cut)"
	}
	fs.IntVar(&l.httpMaxConns, "http-max-conns", l.httpMaxConns, "HTTP: open connections at most; at the cap the client address holding the most sheds one, else the new one is closed (0: no cap)")
	fs.IntVar(&l.httpMaxConnsPerIP, "http-max-conns-per-ip", l.httpMaxConnsPerIP, "HTTP: open connections from one client address at most; more are closed on accept (0: no cap)")
	fs.DurationVar(&l.httpReadHeader, "http-read-header-timeout", l.httpReadHeader, "HTTP: time a client has to send a request's headers")
	fs.DurationVar(&l.httpRead, "http-read-timeout", l.httpRead, readUsage)
	fs.DurationVar(&l.httpIdle, "http-idle-timeout", l.httpIdle, "HTTP: close a kept-alive connection idle for this long")
	fs.IntVar(&l.httpMaxHeaderBytes, "http-max-header-bytes", l.httpMaxHeaderBytes, "HTTP: largest request line and headers, in bytes")
}

// validate reports the first limit that cannot be used.
func (l *connLimits) validate() string {
	if msg := l.validateHTTP(); msg != "" {
		return msg
	}
	switch {
	case l.httpRead == 0:
		return "--http-read-timeout must be positive"
	case l.grpcMaxConns < 0 || l.grpcMaxConnsPerIP < 0 || l.grpcMaxStreams < 0:
		return "--grpc-max-conns, --grpc-max-conns-per-ip and --grpc-max-streams must not be negative"
	case l.grpcMaxStreams > math.MaxUint32:
		return "--grpc-max-streams is too large"
	case l.grpcHandshake <= 0 || l.grpcKeepaliveMin <= 0:
		return "--grpc-handshake-timeout and --grpc-keepalive-min-time must be positive"
	}
	for name, d := range map[string]time.Duration{"--grpc-idle-timeout": l.grpcIdle, "--grpc-max-conn-age": l.grpcMaxAge,
		"--grpc-max-conn-age-grace": l.grpcMaxAgeGrace, "--grpc-keepalive-time": l.grpcKeepaliveTime, "--grpc-rpc-timeout": l.grpcRPCTimeout} {
		if d < 0 {
			return name + " must not be negative"
		}
	}
	return ""
}

// validateHTTP reports the first HTTP limit that cannot be used; an
// --http-read-timeout of 0 is none (validate refuses it for serve).
func (l *connLimits) validateHTTP() string {
	switch {
	case l.httpMaxConns < 0 || l.httpMaxConnsPerIP < 0 || l.httpRead < 0 || l.httpMinBodyRate < 0:
		return "--http-max-conns, --http-max-conns-per-ip, --http-read-timeout and --http-min-body-rate must not be negative"
	case l.httpReadHeader <= 0 || l.httpIdle <= 0:
		return "--http-read-header-timeout and --http-idle-timeout must be positive"
	case l.httpMaxHeaderBytes < 4096:
		return "--http-max-header-bytes must be at least 4096"
	}
	return ""
}

// grpcOptions are the gRPC server's options enforcing l.
func (l *connLimits) grpcOptions() []grpc.ServerOption {
	params := keepalive.ServerParameters{
		MaxConnectionIdle:     orForever(l.grpcIdle),
		MaxConnectionAge:      orForever(l.grpcMaxAge),
		MaxConnectionAgeGrace: orForever(l.grpcMaxAgeGrace),
		Time:                  orForever(l.grpcKeepaliveTime),
		Timeout:               keepaliveTimeout,
	}
	opts := []grpc.ServerOption{
		grpc.ConnectionTimeout(l.grpcHandshake),
		grpc.KeepaliveParams(params),
		// Envoy may ping an idle connection to keep it warm: allowed, at
		// most once per MinTime.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: l.grpcKeepaliveMin, PermitWithoutStream: true}),
		grpc.InTapHandle(l.tapStream),
	}
	if l.grpcMaxStreams > 0 {
		opts = append(opts, grpc.MaxConcurrentStreams(uint32(l.grpcMaxStreams)))
	}
	return opts
}

// orForever maps 0 ("off") to the longest duration: gRPC reads its zero
// values as "use the default".
func orForever(d time.Duration) time.Duration {
	if d == 0 {
		return time.Duration(math.MaxInt64)
	}
	return d
}
