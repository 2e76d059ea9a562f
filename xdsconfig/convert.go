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
	m := mapping()
	addStr(m, "domain", rc.GetDomain())
	if ds := rc.GetDescriptors(); len(ds) > 0 {
		add(m, "descriptors", descriptorsOf(ds))
	}
	return m
}

func descriptorsOf(ds []*rlsconf.RateLimitDescriptor) *yaml.Node {
	seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, d := range ds {
		m := mapping()
		addStr(m, "key", d.GetKey())
		if d.GetValue() != "" {
			addStr(m, "value", d.GetValue())
		}
		if rl := d.GetRateLimit(); rl != nil {
			add(m, "rate_limit", rateLimitOf(rl))
		}
		if children := d.GetDescriptors(); len(children) > 0 {
			add(m, "descriptors", descriptorsOf(children))
		}
		addTrue(m, "shadow_mode", d.GetShadowMode())
		addTrue(m, "detailed_metric", d.GetDetailedMetric())
		addTrue(m, "quota_mode", d.GetQuotaMode())
		seq.Content = append(seq.Content, m)
	}
	return seq
}

func rateLimitOf(rl *rlsconf.RateLimitPolicy) *yaml.Node {
	m := mapping()
	addTrue(m, "unlimited", rl.GetUnlimited())
	if rl.GetUnit() != rlsconf.RateLimitUnit_UNKNOWN {
		// The parser matches unit names case-insensitively, as ratelimit does.
		addStr(m, "unit", rl.GetUnit().String())
	}
	if !rl.GetUnlimited() || rl.GetRequestsPerUnit() != 0 {
		add(m, "requests_per_unit", scalar("!!int", strconv.FormatUint(uint64(rl.GetRequestsPerUnit()), 10)))
	}
	if rl.GetName() != "" {
		addStr(m, "name", rl.GetName())
	}
	if rs := rl.GetReplaces(); len(rs) > 0 {
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, r := range rs {
			item := mapping()
			addStr(item, "name", r.GetName())
			seq.Content = append(seq.Content, item)
		}
		add(m, "replaces", seq)
	}
	return m
}

func mapping() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"} }

func scalar(tag, value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}

func add(m *yaml.Node, key string, v *yaml.Node) {
	m.Content = append(m.Content, scalar("!!str", key), v)
}

func addStr(m *yaml.Node, key, value string) { add(m, key, scalar("!!str", value)) }

func addTrue(m *yaml.Node, key string, set bool) {
	if set {
		add(m, key, scalar("!!bool", "true"))
	}
}
