package xdsconfig_test

import (
	"reflect"
	"strings"
	"testing"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/xdsconfig"
)

func anyOf(t testing.TB, rcs ...*rlsconf.RateLimitConfig) []*anypb.Any {
	t.Helper()
	out := make([]*anypb.Any, len(rcs))
	for i, rc := range rcs {
		a, err := anypb.New(rc)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = a
	}
	return out
}

// fullConfig uses every field of the proto.
func fullConfig() *rlsconf.RateLimitConfig {
	limit := func(unit rlsconf.RateLimitUnit, n uint32) *rlsconf.RateLimitPolicy {
		return &rlsconf.RateLimitPolicy{Unit: unit, RequestsPerUnit: n}
	}
	return &rlsconf.RateLimitConfig{Name: "edge-config", Domain: "edge", Descriptors: []*rlsconf.RateLimitDescriptor{
		{Key: "remote_address", RateLimit: limit(rlsconf.RateLimitUnit_SECOND, 10), DetailedMetric: true},
		{Key: "user", Value: "banned", RateLimit: limit(rlsconf.RateLimitUnit_HOUR, 0)},
		{Key: "user", Value: "admin", RateLimit: &rlsconf.RateLimitPolicy{Unlimited: true}},
		{Key: "tenant", Value: "big*", ShadowMode: true, RateLimit: limit(rlsconf.RateLimitUnit_WEEK, 7)},
		{Key: "plan", Value: "free", QuotaMode: true, RateLimit: limit(rlsconf.RateLimitUnit_YEAR, 1000)},
		{Key: "path", Descriptors: []*rlsconf.RateLimitDescriptor{
			{Key: "method", Value: "GET", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MONTH,
				RequestsPerUnit: 5, Name: "narrow", Replaces: []*rlsconf.RateLimitReplace{{Name: "wide"}}}},
			{Key: "method", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_DAY, RequestsPerUnit: 50, Name: "wide"}},
		}},
	}}
}

// fullFile is fullConfig as an envoyproxy/ratelimit file.
const fullFile = `
domain: edge
descriptors:
  - key: remote_address
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: user
    value: banned
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: user
    value: admin
    rate_limit: {unlimited: true}
  - key: tenant
    value: big*
    shadow_mode: true
    rate_limit: {unit: week, requests_per_unit: 7}
  - key: plan
    value: free
    quota_mode: true
    rate_limit: {unit: year, requests_per_unit: 1000}
  - key: path
    descriptors:
      - key: method
        value: GET
        rate_limit: {unit: month, requests_per_unit: 5, name: narrow, replaces: [{name: wide}]}
      - key: method
        rate_limit: {unit: day, requests_per_unit: 50, name: wide}
`

// withoutOrigin forgets where policies were defined, which differs between
// a file and a resource by design.
func withoutOrigin(c *config.Config) *config.Config {
	for _, p := range c.Policies {
		p.File, p.Line = "", 0
	}
	c.Files = nil
	return c
}

// TestConvertMatchesFile: a RateLimitConfig means exactly what the same
// configuration means in a file.
func TestConvertMatchesFile(t *testing.T) {
	got, err := xdsconfig.Convert(anyOf(t, fullConfig()), xdsconfig.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Files[0] != "xds:edge-config" {
		t.Errorf("source %q", got.Files[0])
	}
	want, err := config.Parse("edge.yaml", []byte(fullFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Policies) != 6 {
		t.Errorf("%d policies, want 6", len(got.Policies))
	}
	if g, w := withoutOrigin(got), withoutOrigin(want); !reflect.DeepEqual(g.Domains, w.Domains) || !reflect.DeepEqual(g.Policies, w.Policies) {
		t.Errorf("from xDS:\n%+v\nfrom a file:\n%+v", g.Policies, w.Policies)
	}
}

// TestConvertRejects: what a file could not hold, a resource cannot either,
// and each problem names the resource and the field.
func TestConvertRejects(t *testing.T) {
	cfg := func(edit func(*rlsconf.RateLimitConfig)) *rlsconf.RateLimitConfig {
		c := fullConfig()
		edit(c)
		return c
	}
	for _, tc := range []struct {
		name string
		res  []*anypb.Any
		want string
	}{
		{"no unit", anyOf(t, cfg(func(c *rlsconf.RateLimitConfig) { c.Descriptors[0].RateLimit.Unit = 0 })),
			"xds:edge-config: descriptors[0].rate_limit.unit: required field is missing"},
		{"empty key", anyOf(t, cfg(func(c *rlsconf.RateLimitConfig) { c.Descriptors[0].Key = "" })),
			"descriptors[0].key: must not be empty"},
		{"empty domain", anyOf(t, cfg(func(c *rlsconf.RateLimitConfig) { c.Domain = "" })), "domain: must not be empty"},
		{"duplicate descriptor", anyOf(t, cfg(func(c *rlsconf.RateLimitConfig) { c.Descriptors[2].Value = "banned" })),
			"is already defined earlier on this level"},
		{"unlimited with a unit", anyOf(t, cfg(func(c *rlsconf.RateLimitConfig) {
			c.Descriptors[2].RateLimit.Unit = rlsconf.RateLimitUnit_SECOND
		})), "not allowed with unlimited"},
		{"replaces itself", anyOf(t, cfg(func(c *rlsconf.RateLimitConfig) {
			c.Descriptors[5].Descriptors[0].RateLimit.Replaces[0].Name = "narrow"
		})), "cannot replace itself"},
		{"a domain twice", anyOf(t, fullConfig(), fullConfig()), `domain "edge" is already defined at xds:edge-config;`},
		{"another type", []*anypb.Any{{TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster"}}, "has type"},
		{"not a proto", []*anypb.Any{{TypeUrl: xdsconfig.TypeURL, Value: []byte{0xff, 0xff}}}, "resource 0"},
	} {
		_, err := xdsconfig.Convert(tc.res, xdsconfig.Limits{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	empty, err := xdsconfig.Convert(nil, xdsconfig.Limits{})
	if err != nil || len(empty.Domains) != 0 || len(empty.Policies) != 0 {
		t.Errorf("no resources: %v %+v", err, empty)
	}
}

// FuzzConvert: whatever bytes a resource holds, Convert returns an error or
// a configuration whose every policy is valid, and never panics.
func FuzzConvert(f *testing.F) {
	good, err := proto.Marshal(fullConfig())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte{})
	bad := fullConfig()
	bad.Descriptors[0].Key = ""
	if b, err := proto.Marshal(bad); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := xdsconfig.Convert([]*anypb.Any{{TypeUrl: xdsconfig.TypeURL, Value: data}}, xdsconfig.Limits{})
		if err != nil {
			return
		}
		for name, p := range cfg.Policies {
			if p.DeniesAll() {
				continue
			}
			if err := p.Validate(); err != nil {
				t.Errorf("policy %s accepted but invalid: %v", name, err)
			}
		}
	})
}
