package xdsconfig

import (
	"fmt"
	"strconv"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/config"
)

// TypeURL is the xDS resource type Sluice subscribes to, as
// envoyproxy/ratelimit's xDS provider does.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// Convert decodes one state-of-the-world set of RateLimitConfig resources
// and validates it as a set of configuration files: each resource is one
// envoyproxy/ratelimit file, read by the same parser, so a limit means
// exactly what it would in a file. Problems name the resource as
// xds:NAME. An empty set is an empty configuration.
func Convert(resources []*anypb.Any) (*config.Config, error) {
	docs := make([]config.Document, 0, len(resources))
	for i, res := range resources {
		if res.GetTypeUrl() != TypeURL {
			return nil, fmt.Errorf("resource %d has type %q, want %s", i, res.GetTypeUrl(), TypeURL)
		}
		var rc rlsconf.RateLimitConfig
		if err := anypb.UnmarshalTo(res, &rc, proto.UnmarshalOptions{}); err != nil {
			return nil, fmt.Errorf("resource %d: %w", i, err)
		}
		docs = append(docs, config.Document{Source: sourceName(&rc, i), Root: documentOf(&rc)})
	}
	return config.ParseDocuments(docs...)
}

// sourceName names a resource in problems; a nameless one by its index.
func sourceName(rc *rlsconf.RateLimitConfig, i int) string {
	if rc.GetName() == "" {
		return fmt.Sprintf("xds:#%d", i)
	}
	return "xds:" + rc.GetName()
}

// documentOf builds the envoyproxy/ratelimit file a RateLimitConfig stands
// for. proto3 cannot tell a zero from an unset field, so zeros are left out,
// except requests_per_unit on a limited rate_limit: 0 there bans the value, as
// in ratelimit.
func documentOf(rc *rlsconf.RateLimitConfig) *yaml.Node {
	var b builder
	m := b.mapping(2)
	b.addStr(m, keyDomain, rc.GetDomain())
	if ds := rc.GetDescriptors(); len(ds) > 0 {
		add(m, keyDescriptors, b.descriptors(ds))
	}
	return m
}

// The field names, and the values that recur, are one node each, shared by
// every mapping: the parser only reads the tree. A version of many
// descriptors then costs a few nodes per descriptor rather than a dozen.
var (
	keyDomain, keyDescriptors, keyKey, keyValue = fixed("domain"), fixed("descriptors"), fixed("key"), fixed("value")
	keyRateLimit, keyShadowMode                 = fixed("rate_limit"), fixed("shadow_mode")
	keyDetailedMetric, keyQuotaMode             = fixed("detailed_metric"), fixed("quota_mode")
	keyUnlimited, keyUnit, keyRequestsPerUnit   = fixed("unlimited"), fixed("unit"), fixed("requests_per_unit")
	keyName, keyReplaces                        = fixed("name"), fixed("replaces")
	nodeTrue                                    = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"}
	unitNodes                                   = func() map[rlsconf.RateLimitUnit]*yaml.Node {
		m := map[rlsconf.RateLimitUnit]*yaml.Node{}
		for v, name := range rlsconf.RateLimitUnit_name {
			// The parser matches unit names case-insensitively, as ratelimit does.
			m[rlsconf.RateLimitUnit(v)] = fixed(name)
		}
		return m
	}()
)

func fixed(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// builder allocates a document's nodes in blocks, which the garbage
// collector then handles as a few objects instead of one per node.
type builder struct{ free []yaml.Node }

func (b *builder) node() *yaml.Node {
	if len(b.free) == 0 {
		b.free = make([]yaml.Node, 256)
	}
	n := &b.free[0]
	b.free = b.free[1:]
	return n
}

// mapping is an empty mapping with room for fields fields.
func (b *builder) mapping(fields int) *yaml.Node {
	m := b.node()
	m.Kind, m.Tag, m.Content = yaml.MappingNode, "!!map", make([]*yaml.Node, 0, 2*fields)
	return m
}

func (b *builder) scalar(tag, value string) *yaml.Node {
	n := b.node()
	n.Kind, n.Tag, n.Value = yaml.ScalarNode, tag, value
	return n
}

func (b *builder) addStr(m, key *yaml.Node, value string) { add(m, key, b.scalar("!!str", value)) }

func (b *builder) descriptors(ds []*rlsconf.RateLimitDescriptor) *yaml.Node {
	seq := b.node()
	seq.Kind, seq.Tag, seq.Content = yaml.SequenceNode, "!!seq", make([]*yaml.Node, 0, len(ds))
	for _, d := range ds {
		m := b.mapping(7)
		b.addStr(m, keyKey, d.GetKey())
		if d.GetValue() != "" {
			b.addStr(m, keyValue, d.GetValue())
		}
		if rl := d.GetRateLimit(); rl != nil {
			add(m, keyRateLimit, b.rateLimit(rl))
		}
		if children := d.GetDescriptors(); len(children) > 0 {
			add(m, keyDescriptors, b.descriptors(children))
		}
		addTrue(m, keyShadowMode, d.GetShadowMode())
		addTrue(m, keyDetailedMetric, d.GetDetailedMetric())
		addTrue(m, keyQuotaMode, d.GetQuotaMode())
		seq.Content = append(seq.Content, m)
	}
	return seq
}

func (b *builder) rateLimit(rl *rlsconf.RateLimitPolicy) *yaml.Node {
	m := b.mapping(5)
	addTrue(m, keyUnlimited, rl.GetUnlimited())
	if rl.GetUnit() != rlsconf.RateLimitUnit_UNKNOWN {
		unit := unitNodes[rl.GetUnit()]
		if unit == nil { // a unit this build does not know: the parser names it
			unit = b.scalar("!!str", rl.GetUnit().String())
		}
		add(m, keyUnit, unit)
	}
	if !rl.GetUnlimited() || rl.GetRequestsPerUnit() != 0 {
		add(m, keyRequestsPerUnit, b.scalar("!!int", strconv.FormatUint(uint64(rl.GetRequestsPerUnit()), 10)))
	}
	if rl.GetName() != "" {
		b.addStr(m, keyName, rl.GetName())
	}
	if rs := rl.GetReplaces(); len(rs) > 0 {
		seq := b.node()
		seq.Kind, seq.Tag, seq.Content = yaml.SequenceNode, "!!seq", make([]*yaml.Node, 0, len(rs))
		for _, r := range rs {
			item := b.mapping(1)
			b.addStr(item, keyName, r.GetName())
			seq.Content = append(seq.Content, item)
		}
		add(m, keyReplaces, seq)
	}
	return m
}

func add(m, key, v *yaml.Node) { m.Content = append(m.Content, key, v) }

func addTrue(m, key *yaml.Node, set bool) {
	if set {
		add(m, key, nodeTrue)
	}
}
