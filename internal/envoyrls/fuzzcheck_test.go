package envoyrls

// What the fuzz targets check: an independent reading of the matching rules,
// the store keys, and the well-formedness of every response.

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dunglas/httpsfv"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
)

// sharedNodes returns, per entry, the node it matched when that node shares
// its threshold, else nil.
func sharedNodes(cfg *config.Config, domain string, entries []config.Entry) []*config.Descriptor {
	out := make([]*config.Descriptor, len(entries))
	for i := range entries {
		if n, plan := naiveMatch(cfg, domain, entries[:i+1]); n != nil && n.Shared && !plan {
			out[i] = n
		}
	}
	return out
}

// naiveMatch walks the tree as the documentation says, ranking the candidates
// at each level (an exact value 0, a wildcard 1, the default 2; the first of
// the best rank wins) and returns the node the entries end at, or nil; plan
// when the last entry matched no node but names the plan of the node before.
func naiveMatch(cfg *config.Config, domain string, entries []config.Entry) (node *config.Descriptor, plan bool) {
	d := cfg.Domains[domain]
	if d == nil || len(entries) == 0 {
		return nil, false
	}
	level := d.Descriptors
	var at *config.Descriptor
	for i, e := range entries {
		prev := at
		at = nil
		bestRank := 3
		for _, n := range level {
			rank := 3
			switch {
			case n.Key != e.Key:
			case n.Value == "":
				rank = 2
			case n.Value == e.Value:
				rank = 0
			case strings.Contains(n.Value, "*"):
				if globRegexp(n.Value).MatchString(e.Value) {
					rank = 1
				}
			}
			if rank < bestRank {
				at, bestRank = n, rank
			}
		}
		if at == nil {
			if prev != nil && i == len(entries)-1 && prev.PlanKey != "" && prev.PlanKey == e.Key {
				return prev, true
			}
			return nil, false
		}
		level = at.Children
	}
	return at, false
}

// globRegexp is the regular expression of a glob: each '*' any run of bytes.
func globRegexp(glob string) *regexp.Regexp {
	parts := strings.Split(glob, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?s)\A` + strings.Join(parts, ".*") + `\z`)
}

// checkMatch compares m with the node the rules lead to.
func checkMatch(t *testing.T, cfg *config.Config, entries []config.Entry, m config.Match, node *config.Descriptor, plan bool) {
	t.Helper()
	want := config.Match{}
	if node != nil {
		want = config.Match{Limits: node.Limits, Unlimited: node.Unlimited}
	}
	if plan {
		want.Plan, want.PlanEntry = entries[len(entries)-1].Value, true
	}
	if m.Unlimited != want.Unlimited || !slices.Equal(m.Limits, want.Limits) || m.Plan != want.Plan || m.PlanEntry != want.PlanEntry {
		t.Fatalf("Match(%q) = %+v, want %+v", entries, m, want)
	}
	if m.Unlimited && len(m.Limits) > 0 {
		t.Fatalf("Match(%q) is unlimited with limits", entries)
	}
	for _, p := range m.Limits {
		if cfg.Policies[p.Name] != p {
			t.Fatalf("Match(%q) returned %q, not a policy of the configuration", entries, p.Name)
		}
	}
}

// checkKey checks storeKey's answer: when the escaped values and their
// separators fit in MaxKeyLen, a key that is not empty and from which the
// values read back, so that two value lists never share a counter; else a
// hashed key, which no plain key can equal.
func checkKey(t *testing.T, entries []config.Entry, key string) {
	t.Helper()
	size := len(entries) - 1
	want := make([]string, len(entries))
	for i, e := range entries {
		want[i] = e.Value
		size += len(e.Value) + strings.Count(e.Value, "|") + strings.Count(e.Value, `\`)
	}
	if key == "" || len(key) > sluice.MaxKeyLen {
		t.Fatalf("storeKey(%q) = %q: %d bytes", entries, key, len(key))
	}
	if size > sluice.MaxKeyLen {
		if !strings.HasPrefix(key, hashedPrefix) || len(key) != len(hashedPrefix)+64 {
			t.Fatalf("storeKey(%q) = %q for a key of %d bytes, want a hashed key", entries, key, size)
		}
		return
	}
	values, ok := decodeKey(key)
	if !ok || !slices.Equal(values, want) {
		t.Fatalf("storeKey(%q) = %q, which reads back as %q (%v)", entries, key, values, ok)
	}
}

// decodeKey undoes storeKey.
func decodeKey(key string) ([]string, bool) {
	if key == emptyKey {
		return []string{""}, true
	}
	var values []string
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '\\':
			i++
			if i == len(key) || key[i] != '\\' && key[i] != '|' {
				return values, false
			}
			b.WriteByte(key[i])
		case '|':
			values = append(values, b.String())
			b.Reset()
		default:
			b.WriteByte(c)
		}
	}
	return append(values, b.String()), true
}

// hasQuotaMode reports whether cfg has a quota-mode limit.
func hasQuotaMode(cfg *config.Config) bool {
	for _, p := range cfg.Policies {
		if p.QuotaMode {
			return true
		}
	}
	return false
}

// replaced reports whether another of the request's limits replaces p.
func replaced(p *config.Policy, all []*config.Policy) bool {
	if p.RuleName == "" {
		return false
	}
	for _, q := range all {
		if q != p && slices.Contains(q.Replaces, p.RuleName) {
			return true
		}
	}
	return false
}

// checkResponse checks what holds for every answered request: one status per
// descriptor, each OK or OVER_LIMIT, the overall code OVER_LIMIT exactly when
// some status is, every reported limit a configured policy or an override,
// and header fields that parse.
func checkResponse(t *testing.T, cfg *config.Config, req *rlsv3.RateLimitRequest, resp *rlsv3.RateLimitResponse) {
	t.Helper()
	if len(resp.GetStatuses()) != len(req.GetDescriptors()) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.GetStatuses()), len(req.GetDescriptors()))
	}
	over := false
	for i, st := range resp.Statuses {
		switch st.GetCode() {
		case codeOK:
		case codeOverLimit:
			over = true
		default:
			t.Fatalf("status %d: code %v", i, st.GetCode())
		}
		if l := st.GetCurrentLimit(); l != nil {
			if l.Name != "" && !ruleNames(cfg)[l.Name] {
				t.Fatalf("status %d reports %q, not a rate_limit's name", i, l.Name)
			}
			if d := st.GetDurationUntilReset(); d == nil || d.AsDuration() <= 0 {
				t.Fatalf("status %d: duration_until_reset %v, want > 0", i, d)
			}
		} else if st.DurationUntilReset != nil {
			t.Fatalf("status %d: %v without a limit", i, st)
		}
	}
	// Quota-mode limits are OVER_LIMIT without denying by themselves; every
	// denial has a status saying so.
	if denied := resp.GetOverallCode() == codeOverLimit; denied && !over || !denied && over && !hasQuotaMode(cfg) {
		t.Fatalf("overall_code %v with statuses %v", resp.GetOverallCode(), resp.Statuses)
	}
	for _, h := range resp.GetResponseHeadersToAdd() {
		switch h.GetKey() {
		case httplimit.HeaderPolicy, httplimit.HeaderRateLimit:
			if _, err := httpsfv.UnmarshalList([]string{h.GetValue()}); err != nil {
				t.Fatalf("%s: %q: %v", h.GetKey(), h.GetValue(), err)
			}
		case httplimit.HeaderRetryAfter:
			if resp.GetOverallCode() != codeOverLimit {
				t.Fatalf("Retry-After %q on an allowed request", h.GetValue())
			}
		case DefaultLimitHeaderNames.Limit, DefaultLimitHeaderNames.Remaining, DefaultLimitHeaderNames.Reset:
			if _, err := strconv.ParseUint(h.GetValue(), 10, 64); err != nil {
				t.Fatalf("%s: %q", h.GetKey(), h.GetValue())
			}
		default:
			t.Fatalf("unexpected header %q", h.GetKey())
		}
	}
}

// ruleNames are the YAML names of cfg's limits.
func ruleNames(cfg *config.Config) map[string]bool {
	names := map[string]bool{}
	for _, p := range cfg.Policies {
		names[p.RuleName] = true
	}
	return names
}
