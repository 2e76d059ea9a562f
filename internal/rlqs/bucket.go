package rlqs

import (
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/envoyrls"
)

// Native bucket ids: a bucket id of exactly these entries (plan optional)
// names a native policy's key, as the HTTP API's {"policy", "key", "plan"}.
const (
	entryPolicy = "policy"
	entryKey    = "key"
	entryPlan   = "plan"
)

// targetKind says what a bucket id resolved to.
type targetKind uint8

const (
	targetLimited   targetKind = iota // limits apply: fair shares are assigned
	targetUnlimited                   // no limit applies: ALLOW_ALL
	targetUnknown                     // a native bucket id naming no policy: DENY_ALL
	targetBanned                      // a limit of 0 applies: DENY_ALL
)

// target is what a bucket id resolved to in one configuration.
type target struct {
	kind   targetKind
	limits []limit // for targetLimited: the enforced limits, in match order
}

// limit is one limit a bucket is subject to.
type limit struct {
	policy *config.Policy // as configured
	key    string         // the store key, as the other front ends make it
	plan   string
}

// boardBucket is the limit's name on the Board: its policy and key, so
// that the Envoys on one (policy, key) share one limit whichever bucket id
// or domain led them there.
func (l limit) boardBucket() string {
	return strconv.Itoa(len(l.policy.Name)) + ":" + l.policy.Name + l.key
}

// bucketName is the canonical form of a bucket id, whose entries are
// unordered: sorted by key, each length-prefixed, so that two different ids
// never share a name.
func bucketName(id map[string]string) string {
	keys := make([]string, 0, len(id))
	n := 0
	for k, v := range id {
		keys = append(keys, k)
		n += len(k) + len(v) + 8
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(n)
	for _, k := range keys {
		v := id[k]
		b.WriteString(strconv.Itoa(len(k)))
		b.WriteByte(':')
		b.WriteString(k)
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}

// resolve finds the limits of bucket id in domain under cfg: a native
// policy's key for a bucket id of policy and key (and plan), else the
// domain's descriptor tree (orderEntries).
func resolve(cfg *config.Config, domain string, id map[string]string) target {
	if pol, ok := nativePolicy(id); ok {
		p := cfg.Policy(pol)
		if p == nil {
			return target{kind: targetUnknown}
		}
		key := envoyrls.StoreKey([]config.Entry{{Key: entryKey, Value: id[entryKey]}})
		return limitsOf([]*config.Policy{p}, key, id[entryPlan], cfg.Domains[domain])
	}
	entries := orderEntries(cfg.Domains[domain], id)
	if entries == nil {
		return target{kind: targetUnlimited}
	}
	m := cfg.MatchShared(domain, entries)
	if m.Unlimited || len(m.Limits) == 0 {
		return target{kind: targetUnlimited}
	}
	if m.PlanEntry {
		entries = entries[:len(entries)-1]
	}
	return limitsOf(m.Limits, envoyrls.StoreKey(entries), m.Plan, cfg.Domains[domain])
}

// nativePolicy reports whether id names a native policy's key, and which.
func nativePolicy(id map[string]string) (string, bool) {
	_, hasKey := id[entryKey]
	_, hasPlan := id[entryPlan]
	want := 2
	if hasPlan {
		want = 3
	}
	p, hasPolicy := id[entryPolicy]
	return p, hasPolicy && hasKey && len(id) == want
}

// limitsOf is the target of policies on key: shadow limits (or all of a
// shadow domain's) never deny, so they are left out; a limit of 0 bans.
func limitsOf(policies []*config.Policy, key, plan string, dom *config.Domain) target {
	t := target{kind: targetLimited}
	for _, p := range policies {
		if p.Shadow || p.QuotaMode || (dom != nil && dom.Shadow) {
			continue
		}
		if p.DeniesAll() {
			return target{kind: targetBanned}
		}
		t.limits = append(t.limits, limit{policy: p, key: key, plan: plan})
	}
	if len(t.limits) == 0 {
		return target{kind: targetUnlimited}
	}
	return t
}

// orderEntries puts the entries of a bucket id, which are unordered, in the
// order dom's descriptor tree asks for them: at each level, the first key
// (in file order of the level's nodes) the bucket id holds and whose value
// the level matches; the remaining entry may then name the plan of the node
// reached. It returns nil when some entry finds no place: the bucket id
// matches no descriptor.
func orderEntries(dom *config.Domain, id map[string]string) []config.Entry {
	if dom == nil || len(id) == 0 {
		return nil
	}
	left := len(id)
	used := make(map[string]bool, len(id))
	entries := make([]config.Entry, 0, len(id))
	level := dom.Descriptors
	var node *config.Descriptor
	for left > 0 {
		next := placeNext(level, id, used)
		if next == nil {
			if node != nil && left == 1 && node.PlanKey != "" && !used[node.PlanKey] {
				if v, ok := id[node.PlanKey]; ok {
					return append(entries, config.Entry{Key: node.PlanKey, Value: v})
				}
			}
			return nil
		}
		node = next
		used[node.Key] = true
		entries = append(entries, config.Entry{Key: node.Key, Value: id[node.Key]})
		level = node.Children
		left--
	}
	return entries
}

// placeNext finds the node of level the next entry of id walks to: of the
// nodes the unused entries match (config.MatchLevel), the first in file
// order. It costs a scan of level per entry, and one more.
func placeNext(level []*config.Descriptor, id map[string]string, used map[string]bool) *config.Descriptor {
	var found []*config.Descriptor
	for k, v := range id {
		if used[k] {
			continue
		}
		if n := config.MatchLevel(level, config.Entry{Key: k, Value: v}); n != nil {
			found = append(found, n)
		}
	}
	if len(found) <= 1 {
		if len(found) == 0 {
			return nil
		}
		return found[0]
	}
	for _, n := range level {
		if slices.Contains(found, n) {
			return n
		}
	}
	return nil
}
