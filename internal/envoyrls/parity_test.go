package envoyrls

import (
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/storetest"
)

// Answers matched to envoyproxy/ratelimit's, field by field, where they
// used to differ.

// TestResetFromCurrentSecond: a fixed window's duration_until_reset, and
// the RateLimit-Reset header, count whole seconds from the current second,
// as ratelimit's window - (unix seconds mod window): 15.3s into the minute
// is 45s, not 44.7s (which Envoy and the header would show as 44).
func TestResetFromCurrentSecond(t *testing.T) {
	cfg := newConfig(domain("d",
		node("m", "", limits(pol("per_minute", 10, time.Minute))),
		node("five", "", limits(pol("per_5m", 10, 5*time.Minute)))))
	e := newEnv(t, openMemory, cfg, WithLimitHeaders(DefaultLimitHeaderNames))
	e.clock.Advance(300 * time.Millisecond)
	resp := e.call("d", 0, desc("m", "x"))
	if got := resp.Statuses[0].DurationUntilReset; got.GetSeconds() != 45 || got.GetNanos() != 0 {
		t.Fatalf("duration_until_reset %v, want 45s", got.AsDuration())
	}
	if h := headerMap(t, resp); h["RateLimit-Reset"] != "45" {
		t.Fatalf("RateLimit-Reset %q, want 45", h["RateLimit-Reset"])
	}
	// unit_multiplier's window: 5 minutes less 15 whole seconds.
	if got := e.call("d", 0, desc("five", "x")).Statuses[0].DurationUntilReset.AsDuration(); got != 285*time.Second {
		t.Fatalf("5-minute window: duration_until_reset %v, want 4m45s", got)
	}
}

// TestLimitHeadersPickLastOverLimit: with several descriptors over their
// limits, the headers describe the last of them, as ratelimit picks it; a
// quota-mode limit over its quota does not take that place from an enforced
// one.
func TestLimitHeadersPickLastOverLimit(t *testing.T) {
	quota := pol("q", 5, time.Minute, func(p *config.Policy) { p.QuotaMode, p.Shadow = true, true })
	cfg := newConfig(domain("d",
		node("a", "", limits(pol("a", 1, time.Minute))),
		node("b", "", limits(pol("b", 2, time.Minute))),
		node("c", "", limits(pol("c", 10, time.Minute))),
		node("q", "", limits(quota))))
	e := newEnv(t, openMemory, cfg, WithLimitHeaders(DefaultLimitHeaderNames))
	e.call("d", 1, desc("a", "x"))
	e.call("d", 2, desc("b", "x"))
	e.call("d", 5, desc("q", "x"))
	for _, c := range []struct {
		descs []string // keys, each with value x
		limit string
	}{
		{[]string{"a", "b", "c"}, "2"},
		{[]string{"b", "a", "c"}, "1"},
		{[]string{"c", "a"}, "1"},
		{[]string{"a", "q"}, "1"},
		{[]string{"q", "b"}, "2"},
	} {
		ds := descs()
		for _, k := range c.descs {
			ds = append(ds, desc(k, "x"))
		}
		resp := e.call("d", 0, ds...)
		want := map[string]string{"RateLimit-Limit": c.limit, "RateLimit-Remaining": "0", "RateLimit-Reset": "45"}
		if h := headerMap(t, resp); !maps.Equal(h, want) {
			t.Errorf("%v: headers %v, want %v", c.descs, h, want)
		}
	}
}

// TestUnknownDomain: a request for a domain no configuration has is OK
// without a limit, as in ratelimit, and is logged (debug) and counted.
func TestUnknownDomain(t *testing.T) {
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := newConfig(domain("d", node("k", "", limits(pol("p", 1, time.Minute)))))
	e := newEnvService(t, openMemory, cfg, func(*storetest.Clock) []service.Option {
		return []service.Option{service.WithLogger(log)}
	})
	checkStatuses(t, e.call("typo", 0, desc("k", "v")), codeOK, noLimit)
	checkStatuses(t, e.call("d", 0, desc("k", "v")), codeOK, ok("p", 0))
	if got := testutil.ToFloat64(e.srv.unknownDomains); got != 1 {
		t.Fatalf("sluice_rls_unknown_domain_total %v, want 1", got)
	}
	if !strings.Contains(logs.String(), "unknown rate limit domain") || !strings.Contains(logs.String(), "domain=typo") {
		t.Fatalf("no log line naming the domain:\n%s", logs.String())
	}
	// A second Server on the same service counts on the same metric.
	if again := New(e.svc); again.unknownDomains != e.srv.unknownDomains {
		t.Fatal("a second Server registered another counter")
	}
}

// TestDynamicMetadata: WithDynamicMetadata (ratelimit's
// RESPONSE_DYNAMIC_METADATA) describes the request in the response's
// dynamic metadata, as ratelimit does; without it there is none.
func TestDynamicMetadata(t *testing.T) {
	cfg := newConfig(domain("d", node("k", "", limits(pol("p", 10, time.Minute)))))
	req := func(e *env) *structpb.Struct {
		return e.call("d", 3, desc("k", "v"), withHits(desc("a", "1", "b", "2"), 2)).GetDynamicMetadata()
	}
	if md := req(newEnv(t, openMemory, cfg)); md != nil {
		t.Fatalf("metadata %v without WithDynamicMetadata", md)
	}
	want := &structpb.Struct{}
	if err := protojson.Unmarshal([]byte(`{
		"domain": "d",
		"hitsAddend": 3,
		"descriptors": [
			{"entries": ["k=v"]},
			{"entries": ["a=1", "b=2"], "hitsAddend": 2}
		]}`), want); err != nil {
		t.Fatal(err)
	}
	if got := req(newEnv(t, openMemory, cfg, WithDynamicMetadata(true))); !proto.Equal(got, want) {
		t.Fatalf("metadata %v, want %v", got, want)
	}
}

// lockedBuffer is a log the goroutines under test and the test share.
type lockedBuffer = testlog.Buffer
