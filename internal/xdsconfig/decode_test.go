package xdsconfig

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// The reference the decoder is held to: the resource decoded by the proto
// library, then written out as the envoyproxy/ratelimit file it stands for,
// field by field, as Sluice did before it had its own decoder.

func refDocument(rc *rlsconf.RateLimitConfig) *yaml.Node {
	m := refMapping()
	refAddStr(m, "domain", rc.GetDomain())
	if ds := rc.GetDescriptors(); len(ds) > 0 {
		refAdd(m, "descriptors", refDescriptors(ds))
	}
	return m
}

func refDescriptors(ds []*rlsconf.RateLimitDescriptor) *yaml.Node {
	seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, d := range ds {
		m := refMapping()
		refAddStr(m, "key", d.GetKey())
		if d.GetValue() != "" {
			refAddStr(m, "value", d.GetValue())
		}
		if rl := d.GetRateLimit(); rl != nil {
			refAdd(m, "rate_limit", refRateLimit(rl))
		}
		if children := d.GetDescriptors(); len(children) > 0 {
			refAdd(m, "descriptors", refDescriptors(children))
		}
		refAddTrue(m, "shadow_mode", d.GetShadowMode())
		refAddTrue(m, "detailed_metric", d.GetDetailedMetric())
		refAddTrue(m, "quota_mode", d.GetQuotaMode())
		seq.Content = append(seq.Content, m)
	}
	return seq
}

func refRateLimit(rl *rlsconf.RateLimitPolicy) *yaml.Node {
	m := refMapping()
	refAddTrue(m, "unlimited", rl.GetUnlimited())
	if rl.GetUnit() != rlsconf.RateLimitUnit_UNKNOWN {
		refAddStr(m, "unit", rl.GetUnit().String())
	}
	if !rl.GetUnlimited() || rl.GetRequestsPerUnit() != 0 {
		refAdd(m, "requests_per_unit", refScalar("!!int", strconv.FormatUint(uint64(rl.GetRequestsPerUnit()), 10)))
	}
	if rl.GetName() != "" {
		refAddStr(m, "name", rl.GetName())
	}
	if rs := rl.GetReplaces(); len(rs) > 0 {
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, r := range rs {
			item := refMapping()
			refAddStr(item, "name", r.GetName())
			seq.Content = append(seq.Content, item)
		}
		refAdd(m, "replaces", seq)
	}
	return m
}

func refMapping() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"} }

func refScalar(tag, value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}

func refAdd(m *yaml.Node, key string, v *yaml.Node) {
	m.Content = append(m.Content, refScalar("!!str", key), v)
}

func refAddStr(m *yaml.Node, key, value string) { refAdd(m, key, refScalar("!!str", value)) }

func refAddTrue(m *yaml.Node, key string, set bool) {
	if set {
		refAdd(m, key, refScalar("!!bool", "true"))
	}
}

// shape counts the descriptors of rc and the depth of its deepest one.
func shape(ds []*rlsconf.RateLimitDescriptor, depth int) (count, deepest int) {
	for _, d := range ds {
		count++
		deepest = max(deepest, depth)
		c, dd := shape(d.GetDescriptors(), depth+1)
		count, deepest = count+c, max(deepest, dd)
	}
	return count, deepest
}

// dump writes a document as YAML, for comparing two.
func dump(t *testing.T, n *yaml.Node) string {
	t.Helper()
	out, err := yaml.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// checkAsProto decodes data within lim and holds the result to the
// reference: where the proto library reads data, the decoder reads the same
// document, or refuses it for the bound it goes past; where the library
// cannot, the decoder may refuse or read it, but stays within lim.
func checkAsProto(t *testing.T, data []byte, lim Limits) {
	t.Helper()
	d := newDecoder(lim)
	doc, name, err := d.config(data)
	if d.build && d.bytes > d.lim.Bytes || d.build && d.descriptors > d.lim.Descriptors {
		t.Fatalf("still building past a bound: %d descriptors, %d bytes", d.descriptors, d.bytes)
	}
	bounds := d.err()
	var rc rlsconf.RateLimitConfig
	if proto.Unmarshal(data, &rc) != nil {
		return
	}
	if err != nil {
		t.Fatalf("the proto library reads it; the decoder: %v", err)
	}
	count, deepest := shape(rc.GetDescriptors(), 1)
	over := count > d.lim.Descriptors || deepest > d.lim.Depth
	switch {
	case over && bounds == nil:
		t.Fatalf("%d descriptors %d deep, within %+v for the decoder", count, deepest, d.lim)
	case over:
		if count > d.lim.Descriptors && deepest <= d.lim.Depth && d.descriptors != count {
			t.Fatalf("the decoder counted %d descriptors, the version has %d", d.descriptors, count)
		}
		return
	case bounds != nil && !strings.Contains(bounds.Error(), "bytes decoded"):
		t.Fatalf("%d descriptors %d deep, within %+v, refused: %v", count, deepest, d.lim, bounds)
	case bounds != nil:
		return // the bytes: checked against what the decoder builds in TestDecodeBytesBound
	}
	if name != rc.GetName() {
		t.Errorf("name %q, want %q", name, rc.GetName())
	}
	if got, want := dump(t, doc), dump(t, refDocument(&rc)); got != want {
		t.Fatalf("decoded:\n%s\nthe proto library's:\n%s", got, want)
	}
}

// wire builds a message field by field.
type wire []byte

func (w wire) str(num protowire.Number, s string) wire {
	return protowire.AppendString(protowire.AppendTag(w, num, protowire.BytesType), s)
}

func (w wire) msg(num protowire.Number, m wire) wire {
	return protowire.AppendBytes(protowire.AppendTag(w, num, protowire.BytesType), m)
}

func (w wire) varint(num protowire.Number, v uint64) wire {
	return protowire.AppendVarint(protowire.AppendTag(w, num, protowire.VarintType), v)
}

func (w wire) fixed32(num protowire.Number, v uint32) wire {
	return protowire.AppendFixed32(protowire.AppendTag(w, num, protowire.Fixed32Type), v)
}

func marshal(t testing.TB, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wireCases are resources that take the proto library's corners.
func wireCases(t testing.TB) map[string][]byte {
	meta, err := structpb.NewStruct(map[string]any{"team": "a", "n": 3.0, "deep": map[string]any{"x": []any{1.0, "y", nil}}})
	if err != nil {
		t.Fatal(err)
	}
	full := &rlsconf.RateLimitConfig{Name: "edge-config", Domain: "edge", Descriptors: []*rlsconf.RateLimitDescriptor{
		{Key: "remote_address", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_SECOND, RequestsPerUnit: 10}, DetailedMetric: true, Metadata: meta},
		{Key: "user", Value: "banned", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_HOUR}},
		{Key: "user", Value: "admin", RateLimit: &rlsconf.RateLimitPolicy{Unlimited: true}},
		{Key: "tenant", Value: "big*", ShadowMode: true, QuotaMode: true, RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_WEEK, RequestsPerUnit: 7}},
		{Key: "path", Descriptors: []*rlsconf.RateLimitDescriptor{
			{Key: "method", Value: "GET", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MONTH,
				RequestsPerUnit: 5, Name: "narrow", Replaces: []*rlsconf.RateLimitReplace{{Name: "wide"}, {}}}},
			{Key: "method", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_DAY, RequestsPerUnit: 50, Name: "wide"}},
		}},
	}}
	limit := wire(nil).varint(limitUnit, 2).varint(limitRequestsPerUnit, 9)
	deep := wire(nil).str(descKey, "k").msg(descRateLimit, limit)
	for range 7 {
		deep = wire(nil).str(descKey, "k").msg(descDescriptors, deep)
	}
	many := wire(nil).str(configDomain, "many")
	for i := range 70 {
		many = many.msg(configDescriptors, wire(nil).str(descKey, "user").str(descValue, fmt.Sprint("u", i)).msg(descRateLimit, limit))
	}
	return map[string][]byte{
		"full":  marshal(t, full),
		"empty": nil,
		// The last of a repeated scalar wins; a message field given twice
		// is merged, later fields over earlier ones, lists appended.
		"repeated fields": wire(nil).str(configDomain, "a").str(configDomain, "b").msg(configDescriptors, wire(nil).
			str(descKey, "x").str(descKey, "y").varint(descShadowMode, 1).varint(descShadowMode, 0).
			msg(descRateLimit, wire(nil).varint(limitUnit, 1).varint(limitRequestsPerUnit, 4).str(limitName, "n").
				msg(limitReplaces, wire(nil).str(replaceName, "r1"))).
			msg(descRateLimit, wire(nil).varint(limitUnit, 3).msg(limitReplaces, wire(nil).str(replaceName, "r2").str(replaceName, "r3")))),
		// Known numbers of another wire type, and unknown numbers, are skipped.
		"other types": wire(nil).varint(configDomain, 5).str(configDomain, "d").fixed32(configDescriptors, 7).str(99, "x").
			msg(configDescriptors, wire(nil).varint(descKey, 1).str(descKey, "k").str(descShadowMode, "yes").varint(descDetailedMetric, 300).
				msg(descRateLimit, wire(nil).str(limitUnit, "MINUTE").varint(limitUnit, 2).fixed32(limitRequestsPerUnit, 1).varint(limitRequestsPerUnit, 3))),
		// Enums and uint32 truncate as the library does; unknown units stay numbers.
		"truncation": wire(nil).str(configDomain, "d").
			msg(configDescriptors, wire(nil).str(descKey, "a").msg(descRateLimit, wire(nil).varint(limitUnit, 1<<32+2).varint(limitRequestsPerUnit, 1<<33+5))).
			msg(configDescriptors, wire(nil).str(descKey, "b").msg(descRateLimit, wire(nil).varint(limitUnit, 99).varint(limitRequestsPerUnit, 1))).
			msg(configDescriptors, wire(nil).str(descKey, "c").msg(descRateLimit, wire(nil).varint(limitUnit, 1<<64-1))),
		"invalid utf-8":    wire(nil).str(configDomain, "d").msg(configDescriptors, wire(nil).str(descKey, "\xff")),
		"truncated":        marshal(t, full)[:40],
		"a deep tree":      wire(nil).str(configDomain, "deep").msg(configDescriptors, deep),
		"70 descriptors":   many,
		"empty rate_limit": wire(nil).str(configDomain, "d").msg(configDescriptors, wire(nil).str(descKey, "k").msg(descRateLimit, nil)),
	}
}

// TestDecodeAsProto: on resources that take the proto library's corners the
// decoder reads what the library reads, within bounds and past them.
func TestDecodeAsProto(t *testing.T) {
	for name, data := range wireCases(t) {
		t.Run(name, func(t *testing.T) {
			checkAsProto(t, data, Limits{})
			checkAsProto(t, data, Limits{Descriptors: 50, Depth: 5})
		})
	}
}

// FuzzDecode holds the decoder to the proto library on any bytes, under
// bounds small enough that the fuzzer crosses them.
func FuzzDecode(f *testing.F) {
	for _, data := range wireCases(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAsProto(t, data, Limits{Descriptors: 50, Depth: 5})
	})
}
