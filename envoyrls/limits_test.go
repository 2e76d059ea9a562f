package envoyrls

import (
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
)

// TestDefaultCaps: with the default caps, a request at each cap is answered
// and one past it is InvalidArgument with a message naming the cap, never
// echoing the request's values.
func TestDefaultCaps(t *testing.T) {
	e := newEnv(t, openMemory, newConfig(domain("d",
		node("k", "", limits(pol("p", 1000, time.Minute))),
		node("a", "", nil, node("b", "", limits(pol("ab", 1000, time.Minute)))))))
	many := func(n int, d func(i int) *ratelimitv3.RateLimitDescriptor) []*ratelimitv3.RateLimitDescriptor {
		ds := make([]*ratelimitv3.RateLimitDescriptor, n)
		for i := range ds {
			ds[i] = d(i)
		}
		return ds
	}
	entries := func(n int) *ratelimitv3.RateLimitDescriptor {
		kv := make([]string, 0, 2*n)
		for range n {
			kv = append(kv, "x", "y")
		}
		return desc(kv...)
	}
	rep := func(c string, n int) string { return strings.Repeat(c, n) }
	override := func(value string) *ratelimitv3.RateLimitDescriptor {
		return withOverride(desc("k", value), 5, typev3.RateLimitUnit_SECOND, 0)
	}
	// The override key is "5/1000000|d|k|" and the value: 14 bytes before it.
	const overridePrefix = len("5/1000000|d|k|")

	cases := []struct {
		name string
		ds   []*ratelimitv3.RateLimitDescriptor
		msg  string // "" when the request is within the caps
	}{
		{"max descriptors", many(DefaultMaxDescriptors, func(int) *ratelimitv3.RateLimitDescriptor { return desc("k", "v") }), ""},
		{"too many descriptors", many(DefaultMaxDescriptors+1, func(int) *ratelimitv3.RateLimitDescriptor { return desc("k", "v") }),
			"65 descriptors, more than the maximum 64"},
		{"max entries", descs(entries(DefaultMaxEntries)), ""},
		{"too many entries", descs(desc("k", "v"), entries(DefaultMaxEntries+1)),
			"descriptor 1: 17 entries, more than the maximum 16"},
		{"too many entries, unmatched", descs(entries(DefaultMaxEntries + 1)), "more than the maximum 16"},
		{"max key, one value", descs(desc("k", rep("v", sluice.MaxKeyLen))), ""},
		{"key too long, one value", descs(desc("k", rep("v", sluice.MaxKeyLen+1))),
			"descriptor 0: the store key would be 1025 bytes, longer than the maximum 1024"},
		{"max key, joined", descs(desc("a", rep("v", 600), "b", rep("v", sluice.MaxKeyLen-601))), ""},
		{"key too long, joined", descs(desc("a", rep("v", 600), "b", rep("v", sluice.MaxKeyLen-600))),
			"1025 bytes, longer than the maximum 1024"},
		{"max key, escaped", descs(desc("k", rep("|", sluice.MaxKeyLen/2))), ""},
		{"key too long, escaped", descs(desc("k", rep(`\`, sluice.MaxKeyLen/2+1))),
			"1026 bytes, longer than the maximum 1024"},
		{"max override key", descs(override(rep("v", sluice.MaxKeyLen-overridePrefix))), ""},
		{"override key too long", descs(override(rep("v", sluice.MaxKeyLen-overridePrefix+1))),
			"1025 bytes, longer than the maximum 1024"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := e.do(&rlsv3.RateLimitRequest{Domain: "d", Descriptors: c.ds})
			if c.msg == "" {
				if err != nil || len(resp.Statuses) != len(c.ds) {
					t.Fatalf("got %v, %v; want %d statuses", resp, err, len(c.ds))
				}
				return
			}
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, %v; want InvalidArgument mentioning %q", resp, err, c.msg)
			}
			for _, echo := range []string{"vvvv", "||||", `\\\\`} {
				if strings.Contains(err.Error(), echo) {
					t.Fatalf("the error echoes the request: %.200v", err)
				}
			}
		})
	}
}
