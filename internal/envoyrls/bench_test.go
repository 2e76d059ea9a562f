package envoyrls

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/internal/tracing/tracingtest"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/redisstore"
)

// noopServer is the peer: an RLS server that says OK at once, so what it
// measures is gRPC on loopback and nothing else.
type noopServer struct{}

var okResponse = &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}

func (noopServer) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return okResponse, nil
}

// benchTarget is one server the benchmark runs against.
type benchTarget struct {
	name     string
	register func(grpc.ServiceRegistrar)
	skip     string // why it cannot run here, if it cannot
}

const (
	benchCallers = 64
	benchKeys    = 10000
)

// BenchmarkShouldRateLimit measures ShouldRateLimit over real loopback gRPC,
// 64 concurrent callers on one connection (as one Envoy worker multiplexes
// its calls), one descriptor per request spread over 10,000 keys, against the
// do-nothing server in the same run: compare the ratio of ns/op. p50-us and
// p99-us are the latency percentiles one caller sees.
//
// The policy is a fixed window (what envoyproxy/ratelimit files give) of
// 1,000 per second per key, which these rates never exhaust: the common,
// allowed path.
func BenchmarkShouldRateLimit(b *testing.B) {
	reqs := make([]*rlsv3.RateLimitRequest, benchKeys)
	for i := range reqs {
		reqs[i] = &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			desc("user", "user-"+strconv.Itoa(i)),
		}}
	}
	cfg := newConfig(domain("bench", node("user", "", limits(pol("per_user", 1000, time.Second)))))
	sluiceOn := func(store sluice.Store) func(grpc.ServiceRegistrar) {
		return New(service.New(storestack.Of(store), cfg, service.WithLogger(quiet))).Register
	}

	servers := []benchTarget{
		{name: "noop", register: func(g grpc.ServiceRegistrar) { rlsv3.RegisterRateLimitServiceServer(g, noopServer{}) }},
		{name: "memory", register: sluiceOn(memory.New())},
	}
	if redistest.Available() {
		srv := redistest.Start(b)
		prefix := "envoyrls-bench-" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
		// A generous timeout: this measures throughput, and a loaded machine
		// can stall a call past the default 100ms.
		store, err := redisstore.Open(srv.URL(), redisstore.WithPrefix(prefix), redisstore.WithTimeout(5*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = store.Close() })
		servers = append(servers, benchTarget{name: "redis", register: sluiceOn(store)})
	} else {
		servers = append(servers, benchTarget{name: "redis", skip: "redis-server is not installed"})
	}

	for _, s := range servers {
		b.Run(s.name, func(b *testing.B) {
			if s.skip != "" {
				b.Skip(s.skip)
			}
			client := rlsv3.NewRateLimitServiceClient(serve(b, s.register))
			// Warm up outside the timing: the connection, the pools, and
			// every key's state in the store.
			drive(b, client, reqs, benchKeys)
			b.ReportAllocs()
			b.ResetTimer()
			lat := drive(b, client, reqs, b.N)
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-us")
			b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-us")
		})
	}
}

// drive makes n calls from benchCallers goroutines, cycling through reqs, and
// returns every call's latency.
func drive(b *testing.B, client rlsv3.RateLimitServiceClient, reqs []*rlsv3.RateLimitRequest, n int) []time.Duration {
	var next atomic.Int64
	var failed atomic.Pointer[string]
	lats := make([][]time.Duration, benchCallers)
	var wg sync.WaitGroup
	for g := range benchCallers {
		wg.Go(func() {
			ctx := context.Background()
			lat := make([]time.Duration, 0, n/benchCallers+1)
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					break
				}
				start := time.Now()
				resp, err := client.ShouldRateLimit(ctx, reqs[i%len(reqs)])
				lat = append(lat, time.Since(start))
				if err != nil {
					msg := err.Error()
					failed.CompareAndSwap(nil, &msg)
				} else if resp.OverallCode != rlsv3.RateLimitResponse_OK {
					msg := "a request was denied: " + resp.String()
					failed.CompareAndSwap(nil, &msg)
				}
			}
			lats[g] = lat
		})
	}
	wg.Wait()
	if msg := failed.Load(); msg != nil {
		b.Fatal(*msg)
	}
	return slices.Concat(lats...)
}

// BenchmarkShouldRateLimitInProcess calls ShouldRateLimit directly, without
// gRPC, on the memory store: what Sluice itself adds to each call, and its
// allocations; the -traced variants with tracing on, every span exported to
// an in-process exporter.
func BenchmarkShouldRateLimitInProcess(b *testing.B) {
	cfg := newConfig(domain("bench",
		node("user", "", limits(pol("per_user", 1000, time.Second))),
		node("tenant", "", nil, node("path", "", limits(pol("per_path", 1000, time.Second))))))
	tp, _ := tracingtest.Provider(b)
	for _, v := range []struct {
		suffix string
		tracer *tracing.Tracer
	}{{"", nil}, {"-traced", tracing.New(tp, false)}} {
		st := storestack.Of(memory.New(), storestack.WithTracer(v.tracer))
		srv := New(service.New(st, cfg, service.WithLogger(quiet)))
		benchInProcess(b, srv, v.suffix)
	}
}

func benchInProcess(b *testing.B, srv *Server, suffix string) {
	one := make([]*rlsv3.RateLimitRequest, benchKeys)
	three := make([]*rlsv3.RateLimitRequest, benchKeys)
	for i := range benchKeys {
		user := "user-" + strconv.Itoa(i)
		one[i] = &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: descs(desc("user", user))}
		three[i] = &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: descs(
			desc("user", user), desc("tenant", "t"+strconv.Itoa(i%10), "path", "/p"), desc("other", "x"))}
	}
	for _, c := range []struct {
		name string
		reqs []*rlsv3.RateLimitRequest
	}{{"1desc", one}, {"3desc", three}} {
		b.Run(c.name+suffix, func(b *testing.B) {
			ctx := context.Background()
			for _, r := range c.reqs { // every key exists before timing
				if _, err := srv.ShouldRateLimit(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := int(next.Add(1)) % len(c.reqs)
					if _, err := srv.ShouldRateLimit(ctx, c.reqs[i]); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkDecode measures what the lenient decoding adds to each request:
// the generated code alone (what gRPC did before), the handler's path (the
// bytes into an Empty, then the generated code), and the fallback a value
// that is not UTF-8 takes.
func BenchmarkDecode(b *testing.B) {
	valid, err := proto.Marshal(&rlsv3.RateLimitRequest{Domain: "bench", Descriptors: descs(
		desc("user", "user-12345"), desc("tenant", "t1", "path", "/api/v1/orders"))})
	if err != nil {
		b.Fatal(err)
	}
	invalid := rawRequest("bench", []string{"user", "user-\xff"}, []string{"tenant", "t1", "path", "/api/v1/orders"})
	run := func(name string, f func() error) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	run("generated", func() error { return proto.Unmarshal(valid, &rlsv3.RateLimitRequest{}) })
	for name, data := range map[string][]byte{"handler": valid, "handler-not-utf8": invalid} {
		run(name, func() error {
			var raw emptypb.Empty
			if err := proto.Unmarshal(data, &raw); err != nil {
				return err
			}
			_, err := decodeRequest(raw.ProtoReflect().GetUnknown())
			return err
		})
	}
}
