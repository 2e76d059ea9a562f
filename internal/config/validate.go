package config

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"go.yaml.in/yaml/v3"
)

// yamlField maps a sluice.PolicyError field (a Go field name) to the YAML node
// and path to blame. For a field that was not written (a burst left at its
// default) it returns the policy's own node with the field's path.
type yamlField func(goField string) (node *yaml.Node, path string)

// checkPolicy runs sp.Validate and reports its failures against the YAML.
// Validate reports only the first invalid field; setting that field to a valid
// value and validating again finds the next, so that a policy with several
// mistakes gets them all reported at once. Fields in bad were already
// reported (they did not parse): they get a placeholder and are not blamed
// again. It returns whether sp is valid and bad is empty.
func (p *fileParser) checkPolicy(sp sluice.Policy, at yamlField, bad map[string]bool) bool {
	skip := map[string]bool{}
	for field := range bad {
		skip[field] = true
		repair(&sp, field)
		if field == "Algorithm" { // whether a burst is allowed depends on it
			skip["Burst"] = true
		}
	}
	valid := len(bad) == 0
	for range 6 { // one round per field at most
		err := sp.Validate()
		if err == nil {
			break
		}
		valid = false
		var pe *sluice.PolicyError
		if !errors.As(err, &pe) {
			n, path := at("")
			p.errorf(n, path, "%v", err)
			break
		}
		if !skip[pe.Field] {
			n, path := at(pe.Field)
			p.errorf(n, path, "%s", pe.Reason)
		}
		if !repair(&sp, pe.Field) {
			break
		}
	}
	return valid
}

// repair sets a field of sp to a valid value (given the others).
func repair(sp *sluice.Policy, goField string) bool {
	switch goField {
	case "Name":
		sp.Name = "x"
	case "Algorithm":
		sp.Algorithm, sp.Burst = sluice.FixedWindow, 0
	case "Limit":
		sp.Limit = 1
	case "Period":
		sp.Period = time.Second
	case "Burst":
		sp.Burst = 0
	default:
		return false
	}
	return true
}

// algorithm reads the algorithm field, which must be set. slots says
// whether the limit may be a concurrency one: a native policy's, which the
// HTTP API and the proxy acquire and release; not a limit of an Envoy
// descriptor, since Envoy's ShouldRateLimit has no call to release a slot.
func (p *fileParser) algorithm(f *fields, key string, slots bool) (sluice.Algorithm, bool) {
	s, set := p.str(f, key)
	if !set {
		return "", false
	}
	a, err := sluice.ParseAlgorithm(s)
	if err != nil {
		names := algorithmNames()
		if slots {
			names += ", " + string(sluice.Concurrency)
		}
		p.errorf(f.get(key), join(f.path, key), "unknown algorithm %q; want one of %s", s, names)
		return "", false
	}
	if a == sluice.Concurrency && !slots {
		p.errorf(f.get(key), join(f.path, key), "algorithm %q is not served to Envoy: its ShouldRateLimit call has no release, so a slot "+
			"would be held until its lease ends; define the limit under policies: and acquire and release it with the HTTP API "+
			"(POST /v1/check, POST /v1/release) or the proxy", s)
		return "", false
	}
	return a, true
}

func algorithmNames() string {
	s := ""
	for i, a := range sluice.Algorithms {
		if i > 0 {
			s += ", "
		}
		s += string(a)
	}
	return s
}

// Warnings lists what makes valid policies costly to run (see
// sluice.Policy.Warning), each prefixed with where the policy is defined,
// sorted. Loading succeeds regardless; validate prints them and serve logs
// them.
func (c *Config) Warnings() []string {
	var out []string
	for _, p := range c.Policies {
		w := p.Warning()
		if w == "" {
			continue
		}
		at := "policy " + p.Name
		if p.File != "" {
			at = fmt.Sprintf("%s:%d: %s", p.File, p.Line, at)
		}
		out = append(out, at+": "+w)
	}
	slices.Sort(out)
	return out
}
