package xdsconfig_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/xdsconfig"
)

// nested is a chain of depth descriptors, each the child of the one before.
func nested(depth int) *rlsconf.RateLimitConfig {
	d := &rlsconf.RateLimitDescriptor{Key: "k", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_SECOND, RequestsPerUnit: 1}}
	for range depth - 1 {
		d = &rlsconf.RateLimitDescriptor{Key: "k", Descriptors: []*rlsconf.RateLimitDescriptor{d}}
	}
	return &rlsconf.RateLimitConfig{Name: "deep", Domain: "deep", Descriptors: []*rlsconf.RateLimitDescriptor{d}}
}

// TestConvertBounds: a version within the bounds converts; one past a bound
// is refused with the bound and the value the version reached. The
// descriptors of all resources count together.
func TestConvertBounds(t *testing.T) {
	lim := xdsconfig.Limits{Descriptors: 100, Depth: 4, Bytes: 1 << 20}
	if cfg, err := xdsconfig.Convert(anyOf(t, flat("a", 60), flat("b", 40)), lim); err != nil || len(cfg.Policies) != 100 {
		t.Fatalf("100 descriptors within a bound of 100: %v", err)
	}
	if _, err := xdsconfig.Convert(anyOf(t, nested(4)), lim); err != nil {
		t.Fatalf("depth 4 within a bound of 4: %v", err)
	}
	for _, tc := range []struct {
		name    string
		version *rlsconf.RateLimitConfig
		more    []*rlsconf.RateLimitConfig
		want    string
	}{
		{"descriptors", flat("a", 60), []*rlsconf.RateLimitConfig{flat("b", 41)},
			"the version has 101 descriptors, over the bound of 100 (--max-descriptors)"},
		{"far past", flat("a", 5000), nil, "the version has 5000 descriptors, over the bound of 100"},
		{"depth", nested(5), nil, "nest deeper than 4 levels, the bound (--max-descriptor-depth)"},
		{"bytes of long values", func() *rlsconf.RateLimitConfig {
			rc := flat("long", 10)
			for _, d := range rc.Descriptors {
				d.Value += strings.Repeat("v", 200<<10)
			}
			return rc
		}(), nil, "over the bound of 1048576 (--xds-max-bytes)"},
		{"bytes of an empty replaces list", func() *rlsconf.RateLimitConfig {
			rc := flat("r", 1)
			rc.Descriptors[0].RateLimit.Replaces = make([]*rlsconf.RateLimitReplace, 20000)
			for i := range rc.Descriptors[0].RateLimit.Replaces {
				rc.Descriptors[0].RateLimit.Replaces[i] = &rlsconf.RateLimitReplace{}
			}
			return rc
		}(), nil, "bytes decoded, over the bound of 1048576"},
	} {
		_, err := xdsconfig.Convert(anyOf(t, append([]*rlsconf.RateLimitConfig{tc.version}, tc.more...)...), lim)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	// A descriptor's metadata is not read, whatever it holds.
	big := flat("meta", 1)
	fields := map[string]any{}
	for i := range 20000 {
		fields[fmt.Sprint("f", i)] = []any{1.0, "x", nil}
	}
	meta, err := structpb.NewStruct(fields)
	if err != nil {
		t.Fatal(err)
	}
	big.Descriptors[0].Metadata = meta
	if _, err := xdsconfig.Convert(anyOf(t, big), lim); err != nil {
		t.Errorf("a descriptor with much metadata: %v", err)
	}
}

// TestConvertRefusesEarly: a version far past the descriptor bound is
// refused for a small part of what building it would cost.
func TestConvertRefusesEarly(t *testing.T) {
	res := anyOf(t, flat("huge", 50_000))
	allocated := func(lim xdsconfig.Limits) (uint64, error) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := xdsconfig.Convert(res, lim)
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc, err
	}
	refused, err := allocated(xdsconfig.Limits{Descriptors: 1000})
	if err == nil || !strings.Contains(err.Error(), "the version has 50000 descriptors, over the bound of 1000") {
		t.Fatalf("refused with %v", err)
	}
	built, err := allocated(xdsconfig.Limits{Descriptors: 50_000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("refusing allocated %d bytes, building %d", refused, built)
	if refused > built/20 {
		t.Errorf("refusing 50,000 descriptors allocated %d bytes, more than a twentieth of building them (%d)", refused, built)
	}
	if lim := (config.Limits{}).WithDefaults(); lim.Descriptors != 100_000 {
		t.Errorf("default descriptor bound %d", lim.Descriptors)
	}
}
