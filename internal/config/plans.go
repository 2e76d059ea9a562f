package config

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"go.yaml.in/yaml/v3"
)

// Plans are a policy's limits per plan (free, pro, ...): a check names its
// plan and is decided under that plan's limit, on the policy's state.
type Plans struct {
	// Default is the plan of a check that names none or an unknown one; ""
	// leaves such checks under the policy's own limit.
	Default string
	// Limits holds each plan's limit, period and burst.
	Limits map[string]PlanLimit
	// From says where a request names its plan besides the HTTP API's
	// plan field; its zero value: nowhere else.
	From PlanSource
}

// PlanSource says where a request names its plan.
type PlanSource struct {
	// DescriptorKey (a limit of an Envoy-format file only): an Envoy rate
	// limit descriptor names its plan in a last entry with this key, after
	// the entries that reach the limit. That entry only picks the plan: it
	// is not part of the counted key.
	DescriptorKey string
	// Header: `sluice proxy` reads the plan from this request header
	// (canonical form), unless the route limit names another.
	Header string
}

// PlanLimit is one plan's limit.
type PlanLimit struct {
	Limit  int64
	Period time.Duration
	Burst  int64
}

// PlanHeaderOf returns the header the proxy reads the plan of l's requests
// from, given its policy: the limit's own, else the policy's; "" for none.
func (l *RouteLimit) PlanHeaderOf(p *Policy) string {
	if l.PlanHeader != "" || p == nil || p.Plans == nil {
		return l.PlanHeader
	}
	return p.Plans.From.Header
}

// maxPlans caps the plans of one policy.
const maxPlans = 64

// ForPlan returns the policy a check naming plan is decided under: the
// plan's limit (or the default plan's, for "" or an unknown plan), with the
// policy's name and algorithm so the state stays the policy's.
func (p *Policy) ForPlan(plan string) sluice.Policy {
	if p.Plans == nil {
		return p.Policy
	}
	l, ok := p.Plans.Limits[plan]
	if !ok {
		if l, ok = p.Plans.Limits[p.Plans.Default]; !ok {
			return p.Policy
		}
	}
	sp := p.Policy
	sp.Limit, sp.Period, sp.Burst = l.Limit, l.Period, l.Burst
	return sp
}

// plans reads a policy's plans section; base is the policy (valid), whose
// period a plan without one takes. envoy says the policy is a limit of an
// Envoy-format file, which descriptors reach: only there can from name a
// descriptor_key.
func (p *fileParser) plans(n *yaml.Node, path string, base sluice.Policy, envoy bool) *Plans {
	f, ok := p.mapping(n, path, "default", "limits", "from")
	if !ok {
		return nil
	}
	out := &Plans{Limits: map[string]PlanLimit{}}
	valid := true
	if fn := f.get("from"); fn != nil {
		out.From, ok = p.planSource(fn, join(path, "from"), envoy)
		valid = ok
	}
	if ln := f.get("limits"); ln == nil {
		p.missing(f, "limits", "a mapping of plan names to {limit, period, burst}")
		valid = false
	} else if ln.Kind != yaml.MappingNode {
		p.errorf(ln, join(path, "limits"), "must be a mapping of plan names to {limit, period, burst}, got %s", describe(ln))
		valid = false
	} else {
		if len(ln.Content)/2 > maxPlans {
			p.errorf(ln, join(path, "limits"), "at most %d plans, got %d", maxPlans, len(ln.Content)/2)
			valid = false
		}
		for i := 0; i+1 < len(ln.Content); i += 2 {
			k, v := ln.Content[i], ln.Content[i+1]
			at := join(join(path, "limits"), k.Value)
			if _, dup := out.Limits[k.Value]; dup {
				p.errorf(k, at, "duplicate plan")
				valid = false
				continue
			}
			if msg := validPlanName(k.Value); k.Kind != yaml.ScalarNode || msg != "" {
				p.errorf(k, at, "a plan name %s", msg)
				valid = false
				continue
			}
			l, ok := p.planLimit(v, at, base)
			valid = valid && ok
			out.Limits[k.Value] = l
		}
	}
	if d, set := p.str(f, "default"); set {
		if _, ok := out.Limits[d]; !ok && valid {
			p.errorf(f.get("default"), join(path, "default"), "names no plan of limits: %q", d)
			valid = false
		}
		out.Default = d
	}
	if !valid {
		return nil
	}
	return out
}

// planLimit reads one plan's limit and checks it as the policy would be
// under it.
func (p *fileParser) planLimit(n *yaml.Node, path string, base sluice.Policy) (PlanLimit, bool) {
	f, ok := p.mapping(n, path, "limit", "period", "burst")
	if !ok {
		return PlanLimit{}, false
	}
	bad := map[string]bool{}
	sp := base
	sp.Burst = 0
	var set bool
	if sp.Limit, set = p.integer(f, "limit"); !p.need(f, "limit", "the units admitted per period under this plan") || !set {
		bad["Limit"] = true
	}
	if f.has("period") {
		if sp.Period, set = p.duration(f, "period"); !set {
			bad["Period"] = true
		}
	}
	if sp.Burst, set = p.integer(f, "burst"); f.has("burst") && !set {
		bad["Burst"] = true
	}
	valid := p.checkPolicy(sp, f.at(map[string]string{"Limit": "limit", "Period": "period", "Burst": "burst"}), bad)
	return PlanLimit{Limit: sp.Limit, Period: sp.Period, Burst: sp.Burst}, valid
}

// planSource reads a plans section's from: block.
func (p *fileParser) planSource(n *yaml.Node, path string, envoy bool) (PlanSource, bool) {
	f, ok := p.mapping(n, path, "descriptor_key", "header")
	if !ok {
		return PlanSource{}, false
	}
	var src PlanSource
	if v, set := p.str(f, "descriptor_key"); set {
		switch {
		case !envoy:
			p.errorf(f.get("descriptor_key"), join(path, "descriptor_key"),
				"Envoy's descriptors reach the limits of envoyproxy/ratelimit-format files, not native policies: "+
					"put these plans in that file's rate_limit, or name the plan with from.header or the HTTP API's plan field")
			ok = false
		case v == "":
			p.errorf(f.get("descriptor_key"), join(path, "descriptor_key"), "must not be empty")
			ok = false
		}
		src.DescriptorKey = v
	} else if f.has("descriptor_key") {
		ok = false
	}
	var fine bool
	src.Header, fine = p.headerName(f, "header")
	ok = ok && fine
	if ok && src == (PlanSource{}) {
		p.errorf(n, path, "names no source: set descriptor_key or header, or leave from: out")
		ok = false
	}
	return src, ok
}

// headerName reads an optional header name, in canonical form; false when
// it is written but unusable.
func (p *fileParser) headerName(f *fields, key string) (string, bool) {
	v, set := p.str(f, key)
	if !set {
		return "", !f.has(key)
	}
	if !validHeaderName(v) {
		p.errorf(f.get(key), join(f.path, key), "not a valid header name: %q", v)
		return "", false
	}
	return http.CanonicalHeaderKey(v), true
}

// validPlanName reports what makes s unfit as a plan name, or "".
func validPlanName(s string) string {
	if s == "" || len(s) > 64 {
		return fmt.Sprintf("must be 1 to 64 bytes, got %d", len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Sprintf("may hold only letters, digits and _-., got %q", s)
		}
	}
	return ""
}
