package envoyrls

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// Requests too large to decide. An error would be let through by an Envoy
// with the default failure_mode_deny: false, so each gets a decision:
// OVER_LIMIT for what cannot be decided, the usual decision for a long value.

func many(n int, d func(i int) *ratelimitv3.RateLimitDescriptor) []*ratelimitv3.RateLimitDescriptor {
	ds := make([]*ratelimitv3.RateLimitDescriptor, n)
	for i := range ds {
		ds[i] = d(i)
	}
	return ds
}

func entries(n int) *ratelimitv3.RateLimitDescriptor {
	kv := make([]string, 0, 2*n)
	for range n {
		kv = append(kv, "x", "y")
	}
	return desc(kv...)
}

func capsEnv(t *testing.T, opts ...Option) *env {
	return newEnv(t, openMemory, newConfig(domain("d",
		node("k", "", limits(pol("p", 1000, time.Minute))),
		node("x", "", limits(pol("xs", 1000, time.Minute)), node("x", "", nil, node("x", "", limits(pol("xxx", 1000, time.Minute))))),
		node("a", "", nil, node("b", "", limits(pol("ab", 1000, time.Minute)))))), opts...)
}

// TestTooManyDescriptors: past the cap every descriptor is OVER_LIMIT without
// a limit, and nothing is charged; at the cap the request is decided.
func TestTooManyDescriptors(t *testing.T) {
	for _, c := range []struct {
		max  int
		opts []Option
	}{{DefaultMaxDescriptors, nil}, {3, []Option{WithMaxDescriptors(3)}}} {
		e := capsEnv(t, c.opts...)
		at := many(c.max, func(int) *ratelimitv3.RateLimitDescriptor { return desc("k", "v") })
		resp := e.call("d", 0, at...)
		if resp.OverallCode != codeOK || resp.Statuses[0].LimitRemaining != uint32(1000-c.max) {
			t.Fatalf("%d descriptors: %v, want OK with %d charged", c.max, resp.Statuses[0], c.max)
		}
		over := many(c.max+1, func(int) *ratelimitv3.RateLimitDescriptor { return desc("k", "v") })
		ws := make([]want, len(over))
		for i := range ws {
			ws[i] = refusedStatus
		}
		checkStatuses(t, e.call("d", 0, over...), codeOverLimit, ws...)
		if got := e.remaining("d", "k", "v"); got != uint32(1000-c.max) {
			t.Fatalf("a refused request was charged: remaining %d, want %d", got, 1000-c.max)
		}
	}
}

// TestTooManyEntries: a descriptor past the entry cap, matched or not, is
// OVER_LIMIT, and so is the request: its other descriptors are not charged.
func TestTooManyEntries(t *testing.T) {
	e := capsEnv(t, WithMaxEntries(3))
	checkStatuses(t, e.call("d", 0, desc("k", "v"), desc("x", "1", "x", "2", "x", "3")), codeOK, ok("p", 999), ok("xxx", 999))
	checkStatuses(t, e.call("d", 0, desc("k", "v"), entries(4)), codeOverLimit, ok("p", 999), refusedStatus)
	checkStatuses(t, e.call("d", 0, entries(17)), codeOverLimit, refusedStatus)
	d := capsEnv(t)
	checkStatuses(t, d.call("d", 0, entries(DefaultMaxEntries)), codeOK, noLimit)
	checkStatuses(t, d.call("d", 0, desc("k", "v"), entries(DefaultMaxEntries+1)), codeOverLimit, ok("p", 1000), refusedStatus)
}

// TestLongValues: a value making a key over sluice.MaxKeyLen is decided on a
// hashed key: counted, its own counter, distinct from every other value.
func TestLongValues(t *testing.T) {
	e := capsEnv(t)
	long := strings.Repeat("v", sluice.MaxKeyLen+1)
	other := strings.Repeat("v", sluice.MaxKeyLen) + "w"
	checkStatuses(t, e.call("d", 0, desc("k", long)), codeOK, ok("p", 999))
	checkStatuses(t, e.call("d", 0, desc("k", long)), codeOK, ok("p", 998))
	checkStatuses(t, e.call("d", 0, desc("k", other)), codeOK, ok("p", 999))
	// A value spelling the hashed key is another value.
	checkStatuses(t, e.call("d", 0, desc("k", storeKey([]config.Entry{{Key: "k", Value: long}}))), codeOK, ok("p", 999))
	// Joined and escaped values, and overrides, the same.
	joined := desc("a", strings.Repeat("v", 600), "b", strings.Repeat("|", 600))
	checkStatuses(t, e.call("d", 0, joined, joined), codeOK, ok("ab", 998), ok("ab", 998))
	o := withOverride(desc("k", long), 2, typev3.RateLimitUnit_MINUTE, 0)
	checkStatuses(t, e.call("d", 0, o), codeOK, ok(anonymous, 1))
	checkStatuses(t, e.call("d", 0, o), codeOK, ok(anonymous, 0))
	checkStatuses(t, e.call("d", 0, o), codeOverLimit, over(anonymous, 0))
	// A heavy one is capped like any other: more than the limit is denied.
	checkStatuses(t, e.call("d", 0, withHits(desc("k", long), 5000)), codeOverLimit, over("p", 0))
}

// TestUndecidableOverrides: an override no policy can express is OVER_LIMIT,
// not an error.
func TestUndecidableOverrides(t *testing.T) {
	e := capsEnv(t)
	for _, d := range []*ratelimitv3.RateLimitDescriptor{
		withOverride(desc("k", "v"), 5, typev3.RateLimitUnit_UNKNOWN, 0),
		withOverride(desc("k", "v"), 5, typev3.RateLimitUnit(99), 0),
		withOverride(desc("k", "v"), 5, typev3.RateLimitUnit_YEAR, 1<<31),
	} {
		checkStatuses(t, e.call("d", 0, desc("k", "w"), d), codeOverLimit, ok("p", 1000), refusedStatus)
	}
}

// rawRequest encodes a RateLimitRequest by hand, so that its strings can be
// any bytes: the generated code refuses to marshal strings that are not
// UTF-8.
func rawRequest(domain string, descriptors ...[]string) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, domain)
	for _, kv := range descriptors {
		var d []byte
		for i := 0; i+1 < len(kv); i += 2 {
			var e []byte
			e = protowire.AppendTag(e, 1, protowire.BytesType)
			e = protowire.AppendString(e, kv[i])
			e = protowire.AppendTag(e, 2, protowire.BytesType)
			e = protowire.AppendString(e, kv[i+1])
			d = protowire.AppendTag(d, 1, protowire.BytesType)
			d = protowire.AppendBytes(d, e)
		}
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, d)
	}
	return b
}

// invokeRaw sends raw as the request (the unknown fields of an Empty are
// marshalled as they are) and decodes the response.
func (e *env) invokeRaw(raw []byte) (*rlsv3.RateLimitResponse, error) {
	in := &emptypb.Empty{}
	in.ProtoReflect().SetUnknown(raw)
	resp := &rlsv3.RateLimitResponse{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := e.conn.Invoke(ctx, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, in, resp)
	return resp, err
}

// TestInvalidUTF8: values that are not UTF-8 are decided over gRPC, each on a
// counter of its own (not one shared U+FFFD bucket); a domain that is not
// UTF-8 is one nothing configures; bytes that are no request are
// InvalidArgument.
func TestInvalidUTF8(t *testing.T) {
	e := capsEnv(t)
	call := func(raw []byte) *rlsv3.RateLimitResponse {
		t.Helper()
		resp, err := e.invokeRaw(raw)
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return resp
	}
	checkStatuses(t, call(rawRequest("d", []string{"k", "\xff"})), codeOK, ok("p", 999))
	checkStatuses(t, call(rawRequest("d", []string{"k", "\xff"})), codeOK, ok("p", 998))
	checkStatuses(t, call(rawRequest("d", []string{"k", "\xfe"})), codeOK, ok("p", 999))
	checkStatuses(t, call(rawRequest("d", []string{"k", "\uFFFD"})), codeOK, ok("p", 999))
	checkStatuses(t, call(rawRequest("d", []string{"a", "\xc3", "b", "\x28"}, []string{"k\xff", "v"})), codeOK, ok("ab", 999), noLimit)
	checkStatuses(t, call(rawRequest("d\xff", []string{"k", "v"})), codeOK, noLimit)
	// An entry sent as a number is skipped the same way, and what is left
	// decided: a domain that is not UTF-8, a descriptor without entries.
	checkStatuses(t, call([]byte("\x0a\x01\xff\x12\x02\x08\x01")), codeOK, noLimit)
	// The usual path still works through the same handler.
	checkStatuses(t, e.call("d", 0, desc("k", "plain")), codeOK, ok("p", 999))
	// Not protobuf at all: gRPC's own INTERNAL. Protobuf, but the domain
	// sent as a number, which protobuf skips as an unknown field: no domain,
	// InvalidArgument.
	for raw, code := range map[string]codes.Code{"\xff": codes.Internal, "\x0a\x05d": codes.Internal, "\x08\x01": codes.InvalidArgument} {
		if _, err := e.invokeRaw([]byte(raw)); status.Code(err) != code {
			t.Fatalf("%q: %v, want %v", raw, err, code)
		}
	}
}

// TestInterceptorSeesRequest: the lenient handler hands interceptors the
// decoded request under the method's full name, as the generated one does.
func TestInterceptorSeesRequest(t *testing.T) {
	svc := capsEnv(t).svc
	srv := New(svc)
	var seen atomic.Value
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if r, ok := req.(*rlsv3.RateLimitRequest); ok && info.FullMethod == rlsv3.RateLimitService_ShouldRateLimit_FullMethodName {
			seen.Store(r.GetDomain())
		}
		return h(ctx, req)
	}))
	srv.Register(g)
	go func() { _ = g.Serve(lis) }()
	defer g.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "d", Descriptors: descs(desc("k", "v"))})
	if err != nil || resp.Statuses[0].LimitRemaining != 999 {
		t.Fatalf("%v, %v", resp, err)
	}
	if seen.Load() != "d" {
		t.Fatalf("the interceptor saw %v", seen.Load())
	}
}
