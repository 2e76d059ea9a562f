package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"go.yaml.in/yaml/v3"
)

// units are envoyproxy/ratelimit's units (matched case-insensitively, as it
// does) with the lengths it uses: a month is 30 days and a year 365.
// Ratelimit's optional calendar months (USE_CALENDAR_MONTH_RATE_LIMIT) have
// no fixed length, so they cannot be a Period; Sluice's period: can express
// any other length.
var units = map[string]time.Duration{
	"second": time.Second,
	"minute": time.Minute,
	"hour":   time.Hour,
	"day":    24 * time.Hour,
	"week":   7 * 24 * time.Hour,
	"month":  30 * 24 * time.Hour,
	"year":   365 * 24 * time.Hour,
}

const unitNames = "second, minute, hour, day, week, month or year"

// Fields of a descriptor and of a rate_limit block: envoyproxy/ratelimit's,
// then Sluice's extensions (rate_limits; algorithm, burst, period).
var (
	descriptorFields = []string{"key", "value", "rate_limit", "descriptors", "shadow_mode",
		"detailed_metric", "value_to_metric", "share_threshold", "quota_mode", "metadata", "rate_limits"}
	rateLimitFields = []string{"unit", "requests_per_unit", "unit_multiplier", "unlimited", "name", "replaces",
		"algorithm", "burst", "period", "plans"}
)

// maxPeriod is the longest period a policy may have (2^52 µs, about 142
// years; see sluice.Policy.Validate), checked before multiplying.
const maxPeriod = time.Duration(1<<52) * time.Microsecond

// envoy reads a file in envoyproxy/ratelimit's format.
func (p *fileParser) envoy(root *yaml.Node, out *parsed) {
	top, ok := p.mappingHint(root, "", " (Sluice's store: and policies: go in a file of their own)",
		"domain", "descriptors")
	if !ok {
		return
	}
	if !p.need(top, "domain", "the domain's name, as Envoy's rate limit filter sends it") {
		return
	}
	domain, ok := p.str(top, "domain")
	if !ok {
		return
	}
	if domain == "" {
		p.errorf(top.get("domain"), "domain", "must not be empty")
		return
	}
	d := &Domain{Name: domain}
	out.domain, out.domainKey = d, top.get("domain")
	if n := top.get("descriptors"); n != nil {
		d.Descriptors, out.policies = p.descriptors(n, "descriptors", name{}.child(d.Name), 1)
		d.index = indexLevel(d.Descriptors)
	}
}

// descriptors reads one level of a descriptor tree and returns it with the
// policies of the whole subtree. parent is the name of the level above, from
// which policy names derive.
func (p *fileParser) descriptors(n *yaml.Node, path string, parent name, depth int) (level []*Descriptor, pols []placed) {
	items, ok := p.list(n, path, "descriptors")
	if !ok {
		return nil, nil
	}
	// The depth bound keeps the recursion and the YAML paths in problems
	// short whatever the file.
	if p.budget.deeper(p, n, path, depth) {
		return nil, nil
	}
	type keyValue struct{ key, value string }
	seen := make(map[keyValue]int, len(items))
	for i, item := range items {
		ipath := index(path, i)
		if !p.budget.descriptor(p, item, ipath) {
			break
		}
		f, ok := p.mapping(item, ipath, descriptorFields...)
		if !ok {
			continue
		}
		d, subtree, ok := p.descriptor(f, parent, depth)
		if d == nil {
			continue
		}
		// Ratelimit rejects a repeated key and value too: which one would apply?
		kv := keyValue{d.Key, d.Value}
		if line, dup := seen[kv]; dup {
			where := fmt.Sprintf("at line %d", line)
			if line == 0 { // a document built in memory
				where = "earlier"
			}
			p.errorf(f.node, ipath, "duplicate descriptor: key %q with value %q is already defined %s on this level",
				d.Key, d.Value, where)
			continue
		}
		seen[kv] = f.node.Line
		if !ok {
			continue
		}
		level = append(level, d)
		pols = append(pols, subtree...)
	}
	return level, pols
}

// descriptor reads one descriptor, its limits and its children. It returns
// the subtree's policies rather than registering them, so that a duplicate
// descriptor is reported once, not again as clashes of the names below it.
// d is nil when the key or value is unusable, ok false when anything is.
func (p *fileParser) descriptor(f *fields, parent name, depth int) (d *Descriptor, pols []placed, ok bool) {
	d = &Descriptor{}
	idOK := p.need(f, "key", "the descriptor key, such as remote_address or generic_key")
	if idOK {
		d.Key, idOK = p.str(f, "key")
		if idOK && d.Key == "" {
			p.errorf(f.get("key"), join(f.path, "key"), "must not be empty")
			idOK = false
		}
	}
	if f.has("value") {
		var set bool
		d.Value, set = p.str(f, "value")
		idOK = idOK && set
	}
	ok = idOK
	shadow, fine := p.optBool(f, "shadow_mode")
	ok = ok && fine
	// Metric-only fields: checked for their type, otherwise ignored (Sluice's
	// metrics are labelled by policy name and do not depend on them).
	// metadata is free-form data for the client, which Sluice does not send.
	for _, key := range []string{"detailed_metric", "value_to_metric"} {
		_, fine = p.optBool(f, key)
		ok = ok && fine
	}
	d.Shared, fine = p.optBool(f, "share_threshold")
	ok = ok && fine
	if d.Shared && !strings.Contains(d.Value, "*") {
		p.errorf(f.get("share_threshold"), join(f.path, "share_threshold"),
			"share_threshold needs a value with a * wildcard, whose matches then share one counter")
		ok = false
	}
	quota, fine := p.optBool(f, "quota_mode")
	ok = ok && fine

	part := "." + d.Key
	if d.Value != "" {
		part += "_" + d.Value
	}
	here := parent.child(part)
	for i, b := range p.limitBlocks(f) {
		pname := here
		if b.of > 1 {
			pname = here.child(fmt.Sprintf(".%d", i+1))
		}
		pol, unlimited := p.rateLimit(b, pname.String(), shadow, quota)
		switch {
		case unlimited && b.of > 1:
			p.errorf(b.node, join(b.path, "unlimited"), "an unlimited descriptor cannot have other limits")
			ok = false
		case unlimited:
			d.Unlimited = true
		case pol != nil:
			d.Limits = append(d.Limits, pol)
			pols = append(pols, placed{pol: pol, node: b.node, field: b.path, derived: true})
		default:
			ok = false
		}
	}
	if n := f.get("descriptors"); n != nil {
		var below []placed
		d.Children, below = p.descriptors(n, join(f.path, "descriptors"), here, depth+1)
		d.index = indexLevel(d.Children)
		pols = append(pols, below...)
	}
	ok = p.planKey(f, d) && ok
	if !idOK {
		return nil, nil, false
	}
	return d, pols, ok
}

// planKey sets d.PlanKey from its limits' plans: all that name a
// descriptor_key must name the same one, and no child may have that key,
// or a descriptor's last entry could either pick a plan or reach the child.
func (p *fileParser) planKey(f *fields, d *Descriptor) bool {
	for _, l := range d.Limits {
		k := ""
		if l.Plans != nil {
			k = l.Plans.From.DescriptorKey
		}
		switch {
		case k == "" || k == d.PlanKey:
		case d.PlanKey == "":
			d.PlanKey = k
		default:
			p.errorf(f.node, f.path, "the limits of one descriptor take their plan from one descriptor_key, got %q and %q", d.PlanKey, k)
			return false
		}
	}
	for _, c := range d.Children {
		if d.PlanKey != "" && c.Key == d.PlanKey {
			p.errorf(f.node, join(f.path, "descriptors"),
				"a child descriptor has key %q, which names the plan of this descriptor's limits (plans.from.descriptor_key): rename one of them", c.Key)
			return false
		}
	}
	return true
}

// block is one rate_limit block: the rate_limit field, or an item of
// Sluice's rate_limits list, of which there are of.
type block struct {
	node *yaml.Node
	path string
	line int // where the policy is defined: the rate_limit key, or the list item
	of   int
}

// limitBlocks returns a descriptor's rate_limit blocks, in order.
func (p *fileParser) limitBlocks(f *fields) []block {
	one, many := f.get("rate_limit"), f.get("rate_limits")
	switch {
	case one != nil && many != nil:
		p.errorf(f.key("rate_limits"), join(f.path, "rate_limits"),
			"rate_limit and rate_limits cannot both be set: put every limit in rate_limits")
		return nil
	case one != nil:
		return []block{{one, join(f.path, "rate_limit"), f.key("rate_limit").Line, 1}}
	case many != nil:
		path := join(f.path, "rate_limits")
		items, ok := p.list(many, path, "rate_limit blocks")
		if ok && len(items) == 0 {
			p.errorf(many, path, "must not be empty; leave it out for a descriptor without limits")
		}
		blocks := make([]block, len(items))
		for i, item := range items {
			blocks[i] = block{item, index(path, i), deref(item).Line, len(items)}
		}
		return blocks
	}
	return nil
}

// rateLimit reads one rate_limit block into a policy called policyName, or
// reports that the block is unlimited.
func (p *fileParser) rateLimit(b block, policyName string, shadow, quota bool) (pol *Policy, unlimited bool) {
	f, ok := p.mapping(b.node, b.path, rateLimitFields...)
	if !ok {
		return nil, false
	}
	ruleName, set := p.str(f, "name")
	ok = set || !f.has("name")
	if unlimited, set = p.boolean(f, "unlimited"); !set && f.has("unlimited") {
		return nil, false // whether the other fields are allowed is unknown
	}
	if unlimited {
		for _, key := range []string{"unit", "requests_per_unit", "unit_multiplier", "period", "algorithm", "burst", "plans"} {
			if f.has(key) {
				p.errorf(f.key(key), join(f.path, key), "not allowed with unlimited: true, which has no limit to configure")
			}
		}
		if f.has("replaces") {
			p.errorf(f.key("replaces"), join(f.path, "replaces"),
				"replaces on an unlimited rate_limit is not supported by Sluice yet")
		}
		return nil, true
	}

	pol = &Policy{File: p.file, Line: b.line, Shadow: shadow || quota, QuotaMode: quota, RuleName: ruleName}
	pol.Name = policyName
	pol.Algorithm = sluice.FixedWindow
	bad := map[string]bool{}
	periodKey := "unit"
	switch hasUnit, hasPeriod := f.has("unit"), f.has("period"); {
	case hasUnit && hasPeriod:
		p.errorf(f.key("period"), join(f.path, "period"),
			"unit and period cannot both be set: unit is ratelimit's, period (a Go duration) is Sluice's")
		bad["Period"] = true
	case hasUnit:
		if unit, known := p.str(f, "unit"); !known {
			bad["Period"] = true
		} else if pol.Period, known = units[strings.ToLower(unit)]; !known {
			p.errorf(f.get("unit"), join(f.path, "unit"), "unknown unit %q; want %s", unit, unitNames)
			bad["Period"] = true
		}
	case hasPeriod:
		periodKey = "period"
		var fine bool
		if pol.Period, fine = p.duration(f, "period"); !fine {
			bad["Period"] = true
		}
	default:
		p.missing(f, "unit", unitNames+` (or Sluice's period: with a Go duration such as "90s")`)
		bad["Period"] = true
	}
	if f.has("unit_multiplier") {
		// As envoyproxy/ratelimit: the window is unit_multiplier units long.
		m, fine := p.integer(f, "unit_multiplier")
		switch {
		case !fine:
			bad["Period"] = true
		case !f.has("unit"):
			p.errorf(f.key("unit_multiplier"), join(f.path, "unit_multiplier"), "needs unit: it counts units")
			bad["Period"] = true
		case m < 1 || m > int64(maxPeriod/max(pol.Period, time.Second)):
			p.errorf(f.get("unit_multiplier"), join(f.path, "unit_multiplier"), "must be from 1 to %d, got %d",
				int64(maxPeriod/max(pol.Period, time.Second)), m)
			bad["Period"] = true
		case !bad["Period"]:
			pol.Period *= time.Duration(m)
		}
	}
	if pol.Limit, set = p.integer(f, "requests_per_unit"); !p.need(f, "requests_per_unit",
		"the number of requests admitted per unit, such as 100") || !set {
		bad["Limit"] = true
	}
	// requests_per_unit: 0 is envoyproxy/ratelimit's way to deny every
	// request (to ban a value). No algorithm runs: see Policy.DeniesAll.
	zero := !bad["Limit"] && pol.Limit == 0
	if f.has("algorithm") {
		if pol.Algorithm, set = p.algorithm(f, "algorithm", false); !set {
			bad["Algorithm"] = true
		}
	}
	if pol.Burst, set = p.integer(f, "burst"); f.has("burst") && !set {
		bad["Burst"] = true
	}
	if n := f.get("replaces"); n != nil {
		pol.Replaces, set = p.replaces(n, join(f.path, "replaces"), ruleName)
		ok = ok && set
	}
	check := pol.Policy
	if zero {
		check.Limit = 1 // validate the other fields as for any limit
	}
	valid := p.checkPolicy(check, f.at(map[string]string{
		"Algorithm": "algorithm", "Limit": "requests_per_unit", "Period": periodKey, "Burst": "burst",
	}), bad)
	if !ok || !valid {
		return nil, false
	}
	if n := f.get("plans"); n != nil {
		if zero {
			p.errorf(f.key("plans"), join(f.path, "plans"), "requests_per_unit: 0 denies every request: a ban has no plans")
			return nil, false
		}
		if pol.Plans = p.plans(n, join(f.path, "plans"), pol.Policy, true); pol.Plans == nil {
			return nil, false
		}
	}
	return pol, false
}

// replaces reads a replaces list: [{name: rule}, ...], as ratelimit writes it.
func (p *fileParser) replaces(n *yaml.Node, path, own string) ([]string, bool) {
	items, ok := p.list(n, path, "{name: ...} entries")
	if !ok {
		return nil, false
	}
	names := make([]string, 0, len(items))
	for i, item := range items {
		f, fine := p.mapping(item, index(path, i), "name")
		if !fine {
			ok = false
			continue
		}
		name, set := p.str(f, "name")
		switch {
		case !set && f.get("name") == nil:
			p.missing(f, "name", "the name of the rate_limit this one replaces")
			ok = false
		case !set:
			ok = false
		case name == "":
			p.errorf(f.get("name"), join(f.path, "name"), "must not be empty")
			ok = false
		case name == own:
			p.errorf(f.get("name"), join(f.path, "name"), "a rate_limit cannot replace itself")
			ok = false
		default:
			names = append(names, name)
		}
	}
	return names, ok
}
