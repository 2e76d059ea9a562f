package config

import (
	"errors"
	"net/url"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"
)

// storeSchemes are the store URL schemes the server knows how to open.
var storeSchemes = []string{"memory", "redis", "rediss", "unix"}

// native reads a file in Sluice's own format: a store section, a list of
// policies and a proxy section.
func (p *fileParser) native(root *yaml.Node, out *parsed) {
	before := len(p.out.list)
	top, ok := p.mappingHint(root, "",
		" (an envoyproxy/ratelimit file has domain: at the top)", "store", "policies", "proxy")
	if !ok {
		return
	}
	if n := top.get("store"); n != nil {
		out.store, out.storeNode, out.storeBody = p.store(n), top.key("store"), n
	}
	if n := top.get("policies"); n != nil {
		items, _ := p.list(n, "policies", "policies")
		for i, item := range items {
			if pol := p.policy(item, index("policies", i)); pol != nil {
				out.policies = append(out.policies, placed{pol: pol, node: item, field: index("policies", i) + ".name"})
			} else if name := scalarField(item, "name"); name != "" {
				// Invalid, but its name still counts: a second policy of that
				// name is a problem of its own, reported with the first's.
				pol := &Policy{File: p.file, Line: item.Line}
				pol.Name = name
				out.policies = append(out.policies, placed{pol: pol, node: item, field: index("policies", i) + ".name", invalid: true})
			}
		}
	}
	if n := top.get("proxy"); n != nil {
		out.proxy = p.proxySection(n, top.key("proxy"))
	}
	if out.store == nil && !top.has("policies") && !top.has("proxy") && len(p.out.list) == before {
		p.errorf(root, "", "nothing to configure: want a store: section, a policies: list, a proxy: section, or several "+
			"(or domain: and descriptors: for an envoyproxy/ratelimit file)")
	}
}

// store reads the store section. The URL is checked only for its scheme:
// opening it is the server's job, and a half-parsed URL is no better.
func (p *fileParser) store(n *yaml.Node) *Store {
	f, ok := p.mapping(n, "store", "url", "timeout", "timeout_min", "timeout_max", "on_error", "nodes", "breaker", "max_keys", "max_bytes", "password_file", "tls", "lease", "key_prefix", "per_second_url")
	if !ok {
		return nil
	}
	s := &Store{}
	if raw, set := p.str(f, "url"); set {
		s.URL = raw
		if raw != "" {
			p.storeURL(f.get("url"), "store.url", raw)
		}
	}
	if raw, set := p.str(f, "per_second_url"); set && raw != "" {
		s.PerSecondURL = raw
		p.storeURL(f.get("per_second_url"), "store.per_second_url", raw)
	}
	s.Timeout = p.nonNegativeDuration(f, "timeout")
	s.TimeoutMin = p.nonNegativeDuration(f, "timeout_min")
	s.TimeoutMax = p.nonNegativeDuration(f, "timeout_max")
	if s.TimeoutMin > 0 && s.TimeoutMax > 0 && s.TimeoutMin > s.TimeoutMax {
		p.errorf(f.get("timeout_min"), "store.timeout_min", "must not exceed timeout_max (%v), got %v", s.TimeoutMax, s.TimeoutMin)
	}
	if v, set := p.str(f, "on_error"); set {
		if !contains([]string{OnErrorOpen, OnErrorClosed, OnErrorLocal}, v) {
			p.errorf(f.get("on_error"), "store.on_error", "must be open, closed or local, got %q", v)
		}
		s.OnError = v
	}
	s.Nodes = p.count(f, "nodes", 1<<20)
	s.MaxKeys = p.count(f, "max_keys", 1<<40)
	if s.MaxBytes = int64(p.count(f, "max_bytes", 1<<50)); s.MaxBytes != 0 && s.MaxBytes < 1<<20 {
		p.errorf(f.get("max_bytes"), "store.max_bytes", "must be at least 1048576 (1 MiB), got %d", s.MaxBytes)
	}
	if n := f.get("breaker"); n != nil {
		if b, ok := p.mapping(n, "store.breaker", "min_calls", "window", "failure_rate", "cooldown", "probes"); ok {
			s.Breaker.MinCalls = p.count(b, "min_calls", 1<<20)
			s.Breaker.Window = p.nonNegativeDuration(b, "window")
			s.Breaker.FailureRate = p.count(b, "failure_rate", 100)
			s.Breaker.Cooldown = p.nonNegativeDuration(b, "cooldown")
			s.Breaker.Probes = p.count(b, "probes", 1<<10)
		}
	}
	if v, set := p.str(f, "password_file"); set {
		s.PasswordFile = p.relative(v)
	}
	if v, set := p.str(f, "key_prefix"); set {
		if msg := CheckKeyPrefix(v); msg != "" {
			p.errorf(f.get("key_prefix"), "store.key_prefix", "%s", msg)
		}
		s.KeyPrefix = v
	}
	if n := f.get("lease"); n != nil {
		// Whether the store is Redis is known only with the URL in force,
		// which --store may set: service.CheckStore says.
		s.Lease = p.leaseSection(n, "store.lease")
	}
	if n := f.get("tls"); n != nil {
		if t, ok := p.mapping(n, "store.tls", "ca_file", "cert_file", "key_file", "server_name", "insecure_skip_verify"); ok {
			s.TLS = &TLS{}
			if v, set := p.str(t, "ca_file"); set {
				s.TLS.CAFile = p.relative(v)
			}
			if v, set := p.str(t, "cert_file"); set {
				s.TLS.CertFile = p.relative(v)
			}
			if v, set := p.str(t, "key_file"); set {
				s.TLS.KeyFile = p.relative(v)
			}
			if (s.TLS.CertFile == "") != (s.TLS.KeyFile == "") {
				p.errorf(n, "store.tls", "cert_file and key_file go together: set both or neither")
			}
			s.TLS.ServerName, _ = p.str(t, "server_name")
			s.TLS.InsecureSkipVerify, _ = p.optBool(t, "insecure_skip_verify")
		}
	}
	return s
}

// nonNegativeDuration reads an optional duration that must not be negative.
func (p *fileParser) nonNegativeDuration(f *fields, key string) time.Duration {
	d, set := p.duration(f, key)
	if set && d < 0 {
		p.errorf(f.get(key), join(f.path, key), "must not be negative, got %v", d)
		return 0
	}
	return d
}

// count reads an optional whole number between 1 and max.
func (p *fileParser) count(f *fields, key string, max int64) int {
	v, set := p.integer(f, key)
	if !set {
		return 0
	}
	if v < 1 || v > max {
		p.errorf(f.get(key), join(f.path, key), "must be between 1 and %d, got %d", max, v)
		return 0
	}
	return int(v)
}

// relative resolves a file name written in the config against the config
// file's directory.
func (p *fileParser) relative(name string) string {
	if name == "" || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(filepath.Dir(p.file), name)
}

// storeURL checks a store URL's scheme. Messages never quote the URL: it may
// hold a password, and these errors end up in logs.
func (p *fileParser) storeURL(n *yaml.Node, field, raw string) {
	const want = "want a memory://, redis://, rediss:// or unix:// URL (a Redis address is written redis://host:6379)"
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		p.errorf(n, field, "%s; this one does not parse: %v", want, err)
		return
	}
	if !contains(storeSchemes, u.Scheme) {
		got := "no scheme"
		if u.Scheme != "" {
			got = "scheme " + u.Scheme
		}
		p.errorf(n, field, "%s, got %s", want, got)
	}
}

// policy reads one item of the policies list; nil when it has problems.
func (p *fileParser) policy(n *yaml.Node, path string) *Policy {
	f, ok := p.mapping(n, path, "name", "algorithm", "limit", "period", "burst", "shadow", "plans", "lease", "share", "share_interval")
	if !ok {
		return nil
	}
	pol := &Policy{File: p.file, Line: f.node.Line}
	bad := map[string]bool{}
	var set bool
	if pol.Name, set = p.str(f, "name"); !p.need(f, "name", "a name such as api_per_key") || !set {
		bad["Name"] = true
	}
	if !p.need(f, "algorithm", "one of "+algorithmNames()) {
		bad["Algorithm"] = true
	} else if pol.Algorithm, set = p.algorithm(f, "algorithm", true); !set {
		bad["Algorithm"] = true
	}
	if pol.Limit, set = p.integer(f, "limit"); !p.need(f, "limit", "the number of units admitted per period, such as 100") || !set {
		bad["Limit"] = true
	}
	if pol.Period, set = p.duration(f, "period"); !p.need(f, "period", `a Go duration such as "1m"`) || !set {
		bad["Period"] = true
	}
	if pol.Burst, set = p.integer(f, "burst"); f.has("burst") && !set {
		bad["Burst"] = true
	}
	pol.Shadow, set = p.optBool(f, "shadow")
	valid := p.checkPolicy(pol.Policy, f.at(map[string]string{
		"Name": "name", "Algorithm": "algorithm", "Limit": "limit", "Period": "period", "Burst": "burst",
	}), bad)
	if !valid || !set || !p.share(f, pol) {
		return nil
	}
	if n := f.get("plans"); n != nil {
		if pol.Plans = p.plans(n, join(path, "plans"), pol.Policy, false); pol.Plans == nil {
			return nil
		}
	}
	if n := f.get("lease"); n != nil {
		if pol.Lease = p.policyLease(n, join(path, "lease"), &pol.Policy); pol.Lease == nil {
			return nil
		}
	}
	return pol
}

// at returns a yamlField that blames the fields named by goToYAML (Go field
// name to YAML key), or the mapping itself when the key is not written.
func (f *fields) at(goToYAML map[string]string) yamlField {
	return func(goField string) (*yaml.Node, string) {
		key, known := goToYAML[goField]
		if !known {
			return f.node, f.path
		}
		if n := f.get(key); n != nil {
			return n, join(f.path, key)
		}
		return f.node, join(f.path, key)
	}
}

// scalarField returns the value of n's key when n is a mapping holding it as
// a plain scalar, else "".
func scalarField(n *yaml.Node, key string) string {
	if n == nil || n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, v := n.Content[i], n.Content[i+1]; k.Value == key && v.Kind == yaml.ScalarNode {
			return v.Value
		}
	}
	return ""
}
