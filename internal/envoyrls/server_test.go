package envoyrls

import (
	"context"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

func TestHealth(t *testing.T) {
	e := newEnv(t, openMemory, newConfig())
	hc := healthpb.NewHealthClient(e.conn)
	check := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("Check(%q): %v", service, err)
		}
		return resp.Status
	}
	for _, svc := range []string{"", ServiceName} {
		if got := check(svc); got != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check(%q) = %v, want SERVING", svc, got)
		}
	}
	if ServiceName != rlsv3.RateLimitService_ServiceDesc.ServiceName {
		t.Fatalf("ServiceName %q, the proto says %q", ServiceName, rlsv3.RateLimitService_ServiceDesc.ServiceName)
	}
	e.srv.SetServing(false)
	for _, svc := range []string{"", ServiceName} {
		if got := check(svc); got != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("after SetServing(false), Check(%q) = %v, want NOT_SERVING", svc, got)
		}
	}
	e.srv.SetServing(true)
	for _, svc := range []string{"", ServiceName} {
		if got := check(svc); got != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("after SetServing(true), Check(%q) = %v, want SERVING", svc, got)
		}
	}
	e.srv.Shutdown()
	e.srv.SetServing(true) // too late: Shutdown is for good
	for _, svc := range []string{"", ServiceName} {
		if got := check(svc); got != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("after Shutdown, Check(%q) = %v, want NOT_SERVING", svc, got)
		}
	}
	// Draining still answers.
	e.call("d", 0, desc("k", "v"))
}

func TestInvalidArgument(t *testing.T) {
	e := newEnv(t, openMemory, newConfig(domain("d",
		node("k", "", limits(pol("p", 10, time.Minute))))),
		WithMaxDescriptors(3), WithMaxEntries(2))
	cases := []struct {
		name string
		req  *rlsv3.RateLimitRequest
		msg  string // in the error message
	}{
		{"empty domain", &rlsv3.RateLimitRequest{Descriptors: descs(desc("k", "v"))}, "domain"},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "d"}, "descriptor list must not be empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.do(c.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want InvalidArgument mentioning %q", err, c.msg)
			}
		})
	}
}

func descs(ds ...*ratelimitv3.RateLimitDescriptor) []*ratelimitv3.RateLimitDescriptor { return ds }

func TestStoreUnavailable(t *testing.T) {
	cfg := newConfig(domain("d", node("k", "", limits(pol("p", 10, time.Minute)))))
	e := newEnv(t, func(testing.TB, sluice.Clock) sluice.Store { return failingStore{} }, cfg)
	for _, ds := range [][]*ratelimitv3.RateLimitDescriptor{
		descs(desc("k", "v")),
		descs(desc("k", "v"), desc("k", "w")),
		descs(withHits(desc("k", "v"), 100), desc("k", "w")), // the peeking path
	} {
		_, err := e.do(&rlsv3.RateLimitRequest{Domain: "d", Descriptors: ds})
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), errDown.Error()) {
			t.Fatalf("%d descriptors: got %v, want Unavailable with the store's error", len(ds), err)
		}
	}
	// Nothing matched, nothing asked of the store.
	checkStatuses(t, e.call("d", 0, desc("x", "v")), codeOK, noLimit)
}

// withOverride sets the descriptor's limit override; mult 0 leaves the
// multiplier unset.
func withOverride(d *ratelimitv3.RateLimitDescriptor, rpu uint32, unit typev3.RateLimitUnit, mult uint32) *ratelimitv3.RateLimitDescriptor {
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
	if mult > 0 {
		d.Limit.UnitMultiplier = wrapperspb.UInt32(mult)
	}
	return d
}

func TestLimitOverride(t *testing.T) {
	cfg := newConfig(domain("d", node("k", "", limits(pol("configured", 100, time.Minute)))))
	e := newEnv(t, openMemory, cfg)
	o := func(v string) *ratelimitv3.RateLimitDescriptor {
		return withOverride(desc("k", v), 2, typev3.RateLimitUnit_SECOND, 0)
	}
	// The override replaces the configured limit.
	resp := e.call("d", 0, o("a"))
	checkStatuses(t, resp, codeOK, ok(anonymous, 1))
	if l := resp.Statuses[0].CurrentLimit; l.Unit != rlsv3.RateLimitResponse_RateLimit_SECOND || l.RequestsPerUnit != 2 {
		t.Fatalf("current_limit %v, want 2 per SECOND", l)
	}
	checkStatuses(t, e.call("d", 0, o("a")), codeOK, ok(anonymous, 0))
	checkStatuses(t, e.call("d", 0, o("a"), desc("k", "a")), codeOverLimit, over(anonymous, 0), ok("configured", 100))
	// Another value, another counter; the configured limit is untouched.
	checkStatuses(t, e.call("d", 0, o("b")), codeOK, ok(anonymous, 1))
	checkStatuses(t, e.call("d", 0, desc("k", "a")), codeOK, ok("configured", 99))
	// Another rate on the same descriptor, another counter.
	checkStatuses(t, e.call("d", 0, withOverride(desc("k", "a"), 3, typev3.RateLimitUnit_SECOND, 0)), codeOK, ok(anonymous, 2))
	// As envoyproxy/ratelimit: a domain without configuration has no
	// limits, overrides included.
	for range 3 {
		checkStatuses(t, e.call("elsewhere", 0, o("a")), codeOK, noLimit)
	}
	// The multiplier: 2 per 10 seconds, reported as 12 per MINUTE.
	resp = e.call("d", 0, withOverride(desc("k", "m"), 2, typev3.RateLimitUnit_SECOND, 10))
	if l := resp.Statuses[0].CurrentLimit; l.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE || l.RequestsPerUnit != 12 {
		t.Fatalf("current_limit %v, want 12 per MINUTE", l)
	}
	// A limit of 0 denies everything, and consumes nothing elsewhere.
	zero := withOverride(desc("k", "z"), 0, typev3.RateLimitUnit_MINUTE, 0)
	checkStatuses(t, e.call("d", 0, zero, desc("k", "c")), codeOverLimit, over(anonymous, 0), ok("configured", 100))
	checkStatuses(t, e.call("d", 0, withHits(zero, 0)), codeOK, ok(anonymous, 0))
}

func TestLimitOverridesOff(t *testing.T) {
	cfg := newConfig(domain("d", node("k", "", limits(pol("configured", 100, time.Minute)))))
	e := newEnv(t, openMemory, cfg, WithLimitOverrides(false))
	d := withOverride(desc("k", "a"), 0, typev3.RateLimitUnit_SECOND, 0)
	checkStatuses(t, e.call("d", 0, d), codeOK, ok("configured", 99))
}

// TestConfigSnapshot: a request is matched against one configuration even
// when a reload lands while it is being served.
func TestConfigSnapshot(t *testing.T) {
	a := newConfig(domain("d", node("k", "", limits(pol("a", 100, time.Minute)))))
	b := newConfig(domain("d", node("k", "", limits(pol("b", 100, time.Minute)))))
	e := newEnv(t, openMemory, a)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			next := a
			if i%2 == 0 {
				next = b
			}
			_ = e.svc.Reload(func() (*config.Config, error) { return next, nil })
		}
	}()
	defer func() { close(stop); <-done }()
	ds := make([]*ratelimitv3.RateLimitDescriptor, 32)
	for i := range ds {
		ds[i] = withHits(desc("k", "v"), 0)
	}
	for range 50 {
		resp := e.call("d", 0, ds...)
		name := resp.Statuses[0].CurrentLimit.GetName()
		for i, st := range resp.Statuses {
			if st.CurrentLimit.GetName() != name {
				t.Fatalf("status %d reports %q, status 0 %q: two configurations in one request", i, st.CurrentLimit.GetName(), name)
			}
		}
	}
}

// TestConfiguredZeroLimit: requests_per_unit: 0 in the configuration bans a
// value: OVER_LIMIT with a limit of 0, nothing consumed on the request's other
// descriptors; in shadow mode it only reports.
func TestConfiguredZeroLimit(t *testing.T) {
	cfg := newConfig(domain("d",
		node("user", "banned", limits(pol("ban", 0, time.Minute))),
		node("user", "watched", limits(pol("ban_trial", 0, time.Minute, shadow))),
		node("k", "", limits(pol("configured", 100, time.Minute)))))
	e := newEnv(t, openMemory, cfg)
	resp := e.call("d", 0, desc("user", "banned"), desc("k", "a"))
	checkStatuses(t, resp, codeOverLimit, over("ban", 0), ok("configured", 100))
	if l := resp.Statuses[0].CurrentLimit; l.RequestsPerUnit != 0 || l.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE {
		t.Fatalf("current_limit %v, want 0 per MINUTE", l)
	}
	checkStatuses(t, e.call("d", 0, desc("user", "watched"), desc("k", "a")), codeOK, ok("ban_trial", 0), ok("configured", 99))
}
