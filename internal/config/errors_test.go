package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

// y joins lines into a YAML document: line n of the document is argument n,
// which keeps the expected line numbers below easy to check.
func y(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// problems parses src and returns its problems as "line:col field: message".
func parseProblems(t *testing.T, src string) []string {
	t.Helper()
	cfg, err := Parse("t.yaml", []byte(src))
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Parse = %+v, %v; want an *Error", cfg, err)
	}
	if cfg != nil {
		t.Errorf("Parse returned a Config with its error")
	}
	var out []string
	for _, p := range e.Problems {
		if p.File != "t.yaml" {
			t.Errorf("problem %+v: File = %q, want t.yaml", p, p.File)
		}
		out = append(out, fmt.Sprintf("%d:%d %s: %s", p.Line, p.Column, p.Field, p.Message))
	}
	return out
}

// checkProblems compares got with want, each want being "line:col field: "
// followed by the start of the message.
func checkProblems(t *testing.T, got, want []string) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.HasPrefix(got[i], want[i])
	}
	if !ok {
		t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// policy is a valid native policy at lines 2-5, with extra lines after it.
func policy(extra ...string) string {
	return y(append([]string{"policies:", "  - name: a", "    algorithm: gcra", "    limit: 10", "    period: 1m"}, extra...)...)
}

func TestNativeProblems(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"unknown field", policy("    brust: 5"),
			[]string{"6:5 policies[0].brust: unknown field (did you mean burst?); allowed here: name, algorithm, limit, period, burst, shadow"}},
		{"unknown top-level field", y("polices: []"),
			[]string{"1:1 polices: unknown field (did you mean policies?); allowed here: store, policies, proxy (an envoyproxy/ratelimit file has domain: at the top)"}},
		{"limit is a string", y("policies:", "  - {name: a, algorithm: gcra, limit: '10', period: 1m}"),
			[]string{`2:39 policies[0].limit: must be a whole number, got the string "10"`}},
		{"limit is a fraction", y("policies:", "  - {name: a, algorithm: gcra, limit: 1.5, period: 1m}"),
			[]string{"2:39 policies[0].limit: must be a whole number, got the number 1.5"}},
		{"period without unit", y("policies:", "  - {name: a, algorithm: gcra, limit: 5, period: 60}"),
			[]string{`2:50 policies[0].period: must be a Go duration such as "1m", "1h30m" or "250ms", got the integer 60`}},
		{"shadow not a boolean", policy("    shadow: maybe"),
			[]string{`6:13 policies[0].shadow: must be true or false, got the string "maybe"`}},
		{"shadow yes is YAML 1.1 true", policy("    shadow: yes", "  - {name: a, algorithm: gcra, limit: 1, period: 1s}"),
			[]string{`7:5 policies[1].name: policy name "a" is already used at t.yaml:2`}},
		{"missing fields", y("policies:", "  - burst: 5"), []string{
			"2:5 policies[0].name: required field is missing",
			"2:5 policies[0].algorithm: required field is missing; want one of fixed_window, sliding_log, sliding_window, token_bucket, leaky_bucket, gcra",
			"2:5 policies[0].limit: required field is missing",
			"2:5 policies[0].period: required field is missing"}},
		{"field without value", y("policies:", "  - name: a", "    algorithm: gcra", "    limit:", "    period: 1m"),
			[]string{"4:5 policies[0].limit: required field has no value"}},
		{"unknown algorithm", y("policies:", "  - {name: a, algorithm: gcar, limit: 5, period: 1s}"),
			[]string{`2:26 policies[0].algorithm: unknown algorithm "gcar"; want one of fixed_window, sliding_log, sliding_window, token_bucket, leaky_bucket, gcra, concurrency`}},
		{"concurrency not served to Envoy", y("domain: d", "descriptors:", "  - key: k", "    rate_limit: {unit: second, requests_per_unit: 5, algorithm: concurrency}"),
			[]string{`4:65 descriptors[0].rate_limit.algorithm: algorithm "concurrency" is not served to Envoy: its ShouldRateLimit call has no release`}},
		{"Validate: limit", y("policies:", "  - name: a", "    algorithm: gcra", "    limit: 0", "    period: 1m"),
			[]string{"4:12 policies[0].limit: must be at least 1, got 0"}},
		{"Validate: period", y("policies:", "  - name: a", "    algorithm: gcra", "    limit: 1", "    period: 500us"),
			[]string{"5:13 policies[0].period: must be at least 1ms, got 500µs"}},
		{"Validate: burst", y("policies:", "  - name: a", "    algorithm: fixed_window", "    limit: 1", "    period: 1s", "    burst: 2"),
			[]string{"6:12 policies[0].burst: applies only to token_bucket, leaky_bucket and gcra"}},
		{"Validate: name", y("policies:", "  - name: a b", "    algorithm: gcra", "    limit: 1", "    period: 1s"),
			[]string{`2:11 policies[0].name: may hold only letters, digits and _-.:/, got "a b"`}},
		{"Validate: every field at once", y("policies:", "  - {name: '', algorithm: token_bucket, limit: -1, period: 0s, burst: -2}"), []string{
			"2:12 policies[0].name: must not be empty",
			"2:48 policies[0].limit: must be at least 1, got -1",
			"2:60 policies[0].period: must be at least 1ms, got 0s",
			"2:71 policies[0].burst: must not be negative, got -2"}},
		{"Validate runs past a field that did not parse", y("policies:", "  - {name: a/b c, algorithm: gcra, limit: x, period: 1s}"), []string{
			`2:12 policies[0].name: may hold only letters, digits and _-.:/, got "a/b c"`,
			`2:43 policies[0].limit: must be a whole number, got the string "x"`}},
		{"policy not a mapping", y("policies: [a]"),
			[]string{`1:12 policies[0]: must be a mapping, got the string "a"`}},
		{"policies not a list", y("policies: {name: a}"),
			[]string{"1:11 policies: must be a list of policies, got a mapping"}},
		{"duplicate YAML key", policy("    limit: 5"),
			[]string{"6:5 policies[0].limit: duplicate field (first set at line 4)"}},
		{"duplicate policy name", y("policies:", "  - {name: a, algorithm: gcra, limit: 5, period: 1s}", "  - {name: a, algorithm: gcra, limit: 5, period: 1s}"),
			[]string{`3:5 policies[1].name: policy name "a" is already used at t.yaml:2; policy names must be unique across all files`}},
		{"duplicate name of an invalid policy", y("policies:", "  - {name: a, algorithm: gcra, limit: 0, period: 1s}", "  - {name: a, algorithm: gcra, limit: 5, period: 1s}"), []string{
			"2:39 policies[0].limit: must be at least 1, got 0",
			`3:5 policies[1].name: policy name "a" is already used at t.yaml:2; policy names must be unique across all files`}},
		{"duplicate policy name, the second invalid", y("policies:", "  - {name: a, algorithm: gcra, limit: 5, period: 1s}", "  - {name: a, algorithm: gcar, limit: 5, period: 1s}"), []string{
			`3:5 policies[1].name: policy name "a" is already used at t.yaml:2; policy names must be unique across all files`,
			`3:26 policies[1].algorithm: unknown algorithm "gcar"`}},
		{"store url scheme", y("store:", "  url: http://user:secret@example.com"),
			[]string{"2:8 store.url: want a memory://, redis://, rediss:// or unix:// URL (a Redis address is written redis://host:6379), got scheme http"}},
		{"store url without scheme", y("store:", "  url: 127.0.0.1:6379"),
			[]string{"2:8 store.url: want a memory://, redis://, rediss:// or unix:// URL (a Redis address is written redis://host:6379); this one does not parse: first path segment in URL cannot contain colon"}},
		{"store url unparsable", y("store:", "  url: 'redis://h:port'"),
			[]string{`2:8 store.url: want a memory://, redis://, rediss:// or unix:// URL (a Redis address is written redis://host:6379); this one does not parse: invalid port ":port" after host`}},
		{"store timeout", y("store:", "  url: redis://h:6379", "  timeout: -1s", "  pool: 5"), []string{
			"3:12 store.timeout: must not be negative, got -1s",
			"4:3 store.pool: unknown field; allowed here: url, timeout"}},
		{"store not a mapping", y("store: redis://h:6379"),
			[]string{`1:8 store: must be a mapping, got the string "redis://h:6379"`}},
		{"nothing to configure", y("store:", "policies:"),
			[]string{"1:1 : nothing to configure"}},
		{"merge key", y("base: &b {algorithm: gcra}", "policies:", "  - <<: *b", "    name: a"), []string{
			"1:1 base: unknown field",
			"3:5 policies[0].<<: YAML merge keys (<<) are not supported",
			"3:5 policies[0].algorithm: required field is missing",
			"3:5 policies[0].limit: required field is missing",
			"3:5 policies[0].period: required field is missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkProblems(t, parseProblems(t, tc.src), tc.want)
		})
	}
}

func TestEnvoyProblems(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"domain without value", y("domain:", "descriptors: []"),
			[]string{"1:1 domain: required field has no value"}},
		{"empty domain", y("domain: ''"), []string{"1:9 domain: must not be empty"}},
		{"store in an Envoy file", y("domain: d", "store: {url: 'memory://'}"),
			[]string{"2:1 store: unknown field; allowed here: domain, descriptors (Sluice's store: and policies: go in a file of their own)"}},
		{"descriptors not a list", y("domain: d", "descriptors: {key: a}"),
			[]string{"2:14 descriptors: must be a list of descriptors, got a mapping"}},
		{"unknown descriptor field", y("domain: d", "descriptors:", "  - key: a", "    rate_limt: {unit: second, requests_per_unit: 1}"),
			[]string{"4:5 descriptors[0].rate_limt: unknown field (did you mean rate_limit?); allowed here: key, value, rate_limit, descriptors,"}},
		{"unknown rate_limit field", y("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      unit: second", "      request_per_unit: 1"), []string{
			"5:7 descriptors[0].rate_limit.requests_per_unit: required field is missing",
			"6:7 descriptors[0].rate_limit.request_per_unit: unknown field (did you mean requests_per_unit?)"}},
		{"missing key", y("domain: d", "descriptors:", "  - value: a"),
			[]string{"3:5 descriptors[0].key: required field is missing"}},
		{"empty key", y("domain: d", "descriptors:", "  - key: ''"),
			[]string{"3:10 descriptors[0].key: must not be empty"}},
		{"key not a string", y("domain: d", "descriptors:", "  - key: [a]"),
			[]string{"3:10 descriptors[0].key: must be a string, got a list"}},
		{"nested unit", y("domain: d", "descriptors:", "  - key: a", "    descriptors:", "      - key: b",
			"      - key: c", "        rate_limit: {unit: fortnight, requests_per_unit: 5}"),
			[]string{`7:28 descriptors[0].descriptors[1].rate_limit.unit: unknown unit "fortnight"; want second, minute, hour, day, week, month or year`}},
		{"missing unit", y("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      requests_per_unit: 5"),
			[]string{"5:7 descriptors[0].rate_limit.unit: required field is missing; want second, minute, hour, day, week, month or year (or Sluice's period:"}},
		{"unit and period", y("domain: d", "descriptors:", "  - key: a", "    rate_limit: {unit: second, period: 2s, requests_per_unit: 5}"),
			[]string{"4:32 descriptors[0].rate_limit.period: unit and period cannot both be set"}},
		{"requests_per_unit missing", y("domain: d", "descriptors:", "  - key: a", "    rate_limit: {unit: second}"),
			[]string{"4:17 descriptors[0].rate_limit.requests_per_unit: required field is missing"}},
		{"unlimited with a limit", y("domain: d", "descriptors:", "  - key: a", "    rate_limit: {unlimited: true, unit: second, requests_per_unit: 5}"), []string{
			"4:35 descriptors[0].rate_limit.unit: not allowed with unlimited: true",
			"4:49 descriptors[0].rate_limit.requests_per_unit: not allowed with unlimited: true"}},
		{"unlimited with replaces", y("domain: d", "descriptors:", "  - key: a", "    rate_limit: {unlimited: true, replaces: [{name: x}]}"),
			[]string{"4:35 descriptors[0].rate_limit.replaces: replaces on an unlimited rate_limit is not supported"}},
		{"unlimited among rate_limits", y("domain: d", "descriptors:", "  - key: a", "    rate_limits:", "      - {unlimited: true}", "      - {unit: second, requests_per_unit: 5}"),
			[]string{"5:9 descriptors[0].rate_limits[0].unlimited: an unlimited descriptor cannot have other limits"}},
		{"rate_limit and rate_limits", y("domain: d", "descriptors:", "  - key: a", "    rate_limit: {unit: second, requests_per_unit: 1}", "    rate_limits: []"),
			[]string{"5:5 descriptors[0].rate_limits: rate_limit and rate_limits cannot both be set"}},
		{"empty rate_limits", y("domain: d", "descriptors:", "  - key: a", "    rate_limits: []"),
			[]string{"4:18 descriptors[0].rate_limits: must not be empty"}},
		{"replaces", y("domain: d", "descriptors:", "  - key: a", "    rate_limit:", "      name: me", "      unit: second", "      requests_per_unit: 1",
			"      replaces:", "        - name: me", "        - name: ''", "        - {}", "        - other"), []string{
			"9:17 descriptors[0].rate_limit.replaces[0].name: a rate_limit cannot replace itself",
			"10:17 descriptors[0].rate_limit.replaces[1].name: must not be empty",
			"11:11 descriptors[0].rate_limit.replaces[2].name: required field is missing",
			`12:11 descriptors[0].rate_limit.replaces[3]: must be a mapping, got the string "other"`}},
		{"duplicate descriptor", y("domain: d", "descriptors:", "  - {key: a, value: x}", "  - {key: a}", "  - {key: a, value: x}", "  - {key: a, value: ''}"), []string{
			`5:5 descriptors[2]: duplicate descriptor: key "a" with value "x" is already defined at line 3 on this level`,
			`6:5 descriptors[3]: duplicate descriptor: key "a" with value "" is already defined at line 4 on this level`}},
		{"duplicate with a subtree: one problem", y("domain: d", "descriptors:",
			"  - {key: a, descriptors: [{key: b, rate_limit: {unit: second, requests_per_unit: 1}}]}",
			"  - {key: a, descriptors: [{key: b, rate_limit: {unit: second, requests_per_unit: 1}}]}"),
			[]string{`4:5 descriptors[1]: duplicate descriptor: key "a" with value "" is already defined at line 3 on this level`}},
		{"duplicate of a descriptor with problems", y("domain: d", "descriptors:",
			"  - {key: a, rate_limit: {unit: sec, requests_per_unit: 1}}", "  - {key: a}"), []string{
			`3:33 descriptors[0].rate_limit.unit: unknown unit "sec"`,
			`4:5 descriptors[1]: duplicate descriptor: key "a" with value "" is already defined at line 3 on this level`}},
		{"extensions", y("domain: d", "descriptors:", "  - key: a", "    rate_limit: {algorithm: token, burst: 5, unit: second, requests_per_unit: 1}",
			"  - key: b", "    rate_limit: {burst: 5, unit: second, requests_per_unit: 1}",
			"  - key: c", "    rate_limit: {algorithm: sliding_window, period: 8760h, requests_per_unit: 1000000000}",
			"  - key: e", "    rate_limit: {period: 1 minute, requests_per_unit: 1}"), []string{
			`4:29 descriptors[0].rate_limit.algorithm: unknown algorithm "token"`,
			"6:25 descriptors[1].rate_limit.burst: applies only to token_bucket, leaky_bucket and gcra, not fixed_window",
			"8:79 descriptors[2].rate_limit.requests_per_unit: sliding_window needs Limit × Period",
			`10:26 descriptors[3].rate_limit.period: must be a Go duration such as "1m", "1h30m" or "250ms", got the string "1 minute"`}},
		{"ratelimit's optional fields", y("domain: d", "descriptors:", "  - {key: a, value: 'x', share_threshold: true}", "  - {key: b, quota_mode: 1}",
			"  - {key: c, share_threshold: false, quota_mode: false, detailed_metric: 1, metadata: {any: [thing]}}"), []string{
			"3:43 descriptors[0].share_threshold: share_threshold needs a value with a * wildcard, whose matches then share one counter",
			"4:26 descriptors[1].quota_mode: must be true or false, got the integer 1",
			"5:74 descriptors[2].detailed_metric: must be true or false, got the integer 1"}},
		{"too deep", "domain: d\ndescriptors: " + strings.Repeat("[{key: k, descriptors: ", 65) + "[]" + strings.Repeat("}]", 65) + "\n",
			[]string{"2:1486 descriptors[0]" + strings.Repeat(".descriptors[0]", 63) + ".descriptors: descriptors nest deeper than 64 levels"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkProblems(t, parseProblems(t, tc.src), tc.want)
		})
	}
}

func TestFileProblems(t *testing.T) {
	laughs := "a: &a [x, x, x, x, x, x, x, x, x]\n"
	for i, prev := 'b', 'a'; i <= 'i'; i, prev = i+1, i {
		laughs += fmt.Sprintf("%c: &%c [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*%c, ", prev), 9), ", "))
	}
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"empty", "", []string{"0:0 : file is empty"}},
		{"comments only", "# nothing\n", []string{"0:0 : file is empty"}},
		{"null document", "~\n", []string{"0:0 : file is empty"}},
		{"two documents", y("policies: []", "---", "policies: []"),
			[]string{"2:1 : a second YAML document starts here; a configuration file holds exactly one"}},
		// yaml.v3 gives the line of the construct being parsed (the mapping
		// that starts on line 2), not of the offending line 3.
		{"syntax error", y("policies:", "  - name: a", " limit: 5"),
			[]string{"2:0 : invalid YAML: did not find expected key"}},
		{"syntax error without a line", "key: \"\\x\"\n",
			[]string{"0:0 : invalid YAML: did not find expected hexdecimal number"}},
		{"not a mapping", y("- a"),
			[]string{"1:1 : the top level must be a mapping: store: and policies: (Sluice's format) or domain: and descriptors: (envoyproxy/ratelimit's), got a list"}},
		{"too large", "# " + strings.Repeat("x", maxFileSize),
			[]string{"0:0 : file is 4194306 bytes, larger than the maximum 4194304 (4 MiB)"}},
		{"alias of itself", y("domain: d", "descriptors: &a [{key: k, descriptors: *a}]"),
			[]string{"0:0 : invalid YAML: anchor 'a' value contains itself"}},
		{"billion laughs", laughs, []string{"0:0 : invalid YAML: document contains excessive aliasing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkProblems(t, parseProblems(t, tc.src), tc.want)
		})
	}
}

// TestSeveralProblems checks that one run reports every problem of a file,
// sorted by line, whatever the order they were found in.
func TestSeveralProblems(t *testing.T) {
	src := y(
		"policies:",
		"  - name: a",
		"    algorithm: gcra",
		"    limit: 0",
		"    period: 1m",
		"  - name: b",
		"    algorithm: fixed",
		"    limit: 5",
		"    period: 1m",
		"    burst: x",
		"store:",
		"  url: ftp://x",
		"  timeout: soon",
	)
	checkProblems(t, parseProblems(t, src), []string{
		"4:12 policies[0].limit: must be at least 1, got 0",
		`7:16 policies[1].algorithm: unknown algorithm "fixed"`,
		`10:12 policies[1].burst: must be a whole number, got the string "x"`,
		"12:8 store.url: want a memory://",
		`13:12 store.timeout: must be a Go duration such as "1m", "1h30m" or "250ms", got the string "soon"`,
	})
}

func TestErrorFormat(t *testing.T) {
	e := &Error{Problems: []Problem{
		{File: "a.yaml", Line: 3, Column: 12, Field: "policies[2].limit", Message: "must be at least 1, got 0"},
		{File: "a.yaml", Line: 7, Message: "invalid YAML: oops"},
		{File: "b.yaml", Message: "file is empty"},
	}}
	want := "a.yaml:3:12: policies[2].limit: must be at least 1, got 0\n" +
		"a.yaml:7: invalid YAML: oops\n" +
		"b.yaml: file is empty"
	if got := e.Error(); got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
}

func TestProblemLimit(t *testing.T) {
	src := "policies:\n"
	for i := range maxProblems + 5 {
		src += fmt.Sprintf("  - {name: a%d, algorithm: gcra, limit: 0, period: 1s}\n", i)
	}
	_, err := Parse("t.yaml", []byte(src))
	var e *Error
	if !errors.As(err, &e) || len(e.Problems) != maxProblems+1 {
		t.Fatalf("got %d problems, want %d", len(e.Problems), maxProblems+1)
	}
	if last := e.Problems[maxProblems]; last.Message != "5 more problems not shown" {
		t.Errorf("last problem = %+v", last)
	}
}

// TestConcurrencyPolicy: a native policy may be a concurrency one (in-flight
// slots, released through the HTTP API or by the proxy), shadow too.
func TestConcurrencyPolicy(t *testing.T) {
	cfg := parseAs(t, "t.yaml", y("policies:", "  - {name: a, algorithm: concurrency, limit: 5, period: 30s, shadow: true}"))
	p := cfg.Policy("a")
	if p == nil || p.Algorithm != sluice.Concurrency || p.Limit != 5 || !p.Shadow {
		t.Fatalf("policy: %+v", p)
	}
}
