package envoyrls

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// Fuzzing descriptor matching and the request → checks conversion.
//
// Both targets run against one configuration: the two Envoy examples
// (domains edge_proxy and api_gateway) and fuzzTree (domain fuzz), which has
// every kind of node: exact values, wildcards (one shadowing another, and a
// bare "*"), defaults, unlimited nodes, a ban, shadow limits, several limits
// on one node, replaces, nesting below exact, wildcard and default nodes, and
// plans named by a descriptor's last entry.
// The seed corpora are in testdata/fuzz/FuzzMatch and testdata/fuzz/FuzzRequest.

const fuzzTree = `domain: fuzz
descriptors:
  - key: k
    value: exact
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: k
    value: ex*
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: k
    value: e*
    rate_limit: {unit: hour, requests_per_unit: 30}
  - key: k
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: k
    value: "*mid*x"
    rate_limit: {unit: minute, requests_per_unit: 6}
  - key: s
    value: "s*x"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 8}
    descriptors:
      - key: t
        value: "a*"
        share_threshold: true
        quota_mode: true
        rate_limit: {unit: minute, requests_per_unit: 2}
  - key: q
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: q
    value: zero
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: w
    value: "*"
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: w
    rate_limit: {unlimited: true}
  - key: w
    value: "w|\\"
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: a
    value: "1"
    descriptors:
      - key: b
        rate_limits:
          - {algorithm: gcra, period: 10s, requests_per_unit: 4, burst: 8}
          - {unit: day, requests_per_unit: 1000, name: daily}
        descriptors:
          - key: c
            value: deep
            rate_limit: {algorithm: sliding_log, unit: minute, requests_per_unit: 2}
          - key: c
            value: d*
            shadow_mode: true
            rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 1}
          - key: c
            rate_limit: {unlimited: true}
  - key: a
    rate_limit: {algorithm: leaky_bucket, period: 1s, requests_per_unit: 50, burst: 100}
    descriptors:
      - key: b
        value: x
        rate_limit: {algorithm: sliding_window, unit: hour, requests_per_unit: 7, replaces: [{name: daily}]}
  - key: g
    value: grouped
    descriptors:
      - key: h
        rate_limit: {unit: minute, requests_per_unit: 9}
  - key: g
    value: gr*
    descriptors:
      - key: h
        value: v
        shadow_mode: true
        rate_limit: {unit: minute, requests_per_unit: 12}
  - key: g
    rate_limit: {unit: minute, requests_per_unit: 11}
    shadow_mode: true
  - key: tenant
    rate_limits:
      - {unit: minute, requests_per_unit: 2, name: tenant_rate, plans: {from: {descriptor_key: plan}, default: free, limits: {free: {limit: 3}, pro: {limit: 50, period: 1h}}}}
      - {unit: hour, requests_per_unit: 100}
    descriptors:
      - key: path
        rate_limit: {unit: second, requests_per_unit: 1}
`

// fuzzEnv is what the fuzz targets share: the configuration, the domains to
// pick from (an unknown one last), and a server deciding on a memory store.
type fuzzEnv struct {
	cfg     *config.Config
	domains []string
	clock   *storetest.Clock
	srv     *Server
}

func newFuzzEnv(f *testing.F, opts ...Option) *fuzzEnv {
	f.Helper()
	tree := filepath.Join(f.TempDir(), "fuzz.yaml")
	if err := os.WriteFile(tree, []byte(fuzzTree), 0o600); err != nil {
		f.Fatal(err)
	}
	cfg, err := config.Load("../../examples/envoy-ratelimit.yaml", "../../examples/envoy-extended.yaml", tree)
	if err != nil {
		f.Fatal(err)
	}
	e := &fuzzEnv{cfg: cfg, clock: storetest.NewClock(storetest.Epoch.Add(15 * time.Second))}
	for name := range cfg.Domains {
		e.domains = append(e.domains, name)
	}
	sort.Strings(e.domains)
	e.domains = append(e.domains, "no_such_domain")
	store := memory.New(memory.WithClock(e.clock), memory.WithMaxKeys(1<<14))
	e.srv = New(service.New(storestack.Of(store), cfg, service.WithLogger(quiet)), opts...)
	return e
}

// parseSpec decodes FuzzMatch's input: descriptors separated by '\n', their
// entries by ';', each entry "key=value" (an entry without '=' has an empty
// value).
func parseSpec(spec string) []*ratelimitv3.RateLimitDescriptor {
	if spec == "" {
		return nil
	}
	var ds []*ratelimitv3.RateLimitDescriptor
	for line := range strings.SplitSeq(spec, "\n") {
		d := &ratelimitv3.RateLimitDescriptor{}
		if line != "" {
			for entry := range strings.SplitSeq(line, ";") {
				k, v, _ := strings.Cut(entry, "=")
				d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v})
			}
		}
		ds = append(ds, d)
	}
	return ds
}

func entriesOf(d *ratelimitv3.RateLimitDescriptor) []config.Entry {
	var out []config.Entry
	for _, e := range d.GetEntries() {
		out = append(out, config.Entry{Key: e.GetKey(), Value: e.GetValue()})
	}
	return out
}

// FuzzMatch: for any descriptors, config.Match returns the limits of the node
// the documented rules lead to (at each level an exact value, else the first
// matching "prefix*" wildcard, else the default, no backtracking), all of them
// policies of the configuration; the store keys of the matched descriptors
// are at most sluice.MaxKeyLen and decode back to the entry values, or the
// request is refused with InvalidArgument; and ShouldRateLimit answers exactly
// the requests the caps allow, with statuses that report the matched limits.
func FuzzMatch(f *testing.F) {
	e := newFuzzEnv(f, WithHeaders(true), WithLimitHeaders(DefaultLimitHeaderNames))
	f.Add(uint8(2), uint8(0), "k=exact\nk=example\nk=e\nk=other\nk=")
	f.Add(uint8(2), uint8(0), "w=w|\\\nw=\nw=anything")
	f.Add(uint8(2), uint8(3), "a=1;b=x\na=1;b=y;c=deep\na=2;b=x\na=1;b=z;c=dx\na=1;b=z;c=q")
	f.Add(uint8(2), uint8(1), "g=grouped;h=1\ng=great;h=v\ng=grouped\ng=gr")
	f.Add(uint8(1), uint8(0), "remote_address=203.0.113.7\nremote_address=198.51.100.66\nuser_agent=kube-probe/1.30\nclient_id=partner-acme;path=/x\nclient_id=c;path=/api/v1/orders/9")
	f.Add(uint8(1), uint8(0), "user_id=u1\npath=/search;user_id=u1\ngeneric_key=signup;remote_address=10.0.0.1")
	f.Add(uint8(0), uint8(200), "api_key=k1\ntenant=t;path=/v1/reports/a\nplan=free\nupstream=payments")
	f.Add(uint8(3), uint8(0), "k=exact")
	f.Add(uint8(2), uint8(0), "")
	f.Add(uint8(2), uint8(0), "k=a|b\\c")
	f.Add(uint8(2), uint8(0), "a=1;b="+strings.Repeat("|", 600))
	f.Add(uint8(2), uint8(0), "a=1;b="+strings.Repeat("v", 1022))
	f.Add(uint8(2), uint8(0), "a=1;b="+strings.Repeat("v", 1023))
	f.Add(uint8(2), uint8(0), "x;x;x;x;x;x;x;x;x;x;x;x;x;x;x;x;x")
	f.Add(uint8(2), uint8(0), "k=amidx\nk=midx\nk=exmidx\ns=sx;t=a\ns=s12x;t=abc\ns=sx\nq=1\nq=zero")
	f.Add(uint8(2), uint8(7), "tenant=a;plan=pro\ntenant=a;plan=free\ntenant=a\ntenant=b;plan=gold\ntenant=a;path=/x;plan=pro\nplan=pro;tenant=a")
	f.Fuzz(func(t *testing.T, dom, addend uint8, spec string) {
		domain := e.domains[int(dom)%len(e.domains)]
		ds := parseSpec(spec)
		req := &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds, HitsAddend: uint32(addend)}

		// What each descriptor matches, by an independent reading of the
		// rules, and whether the server must refuse the request.
		matched := make([][]*config.Policy, len(ds))
		refused := make([]bool, len(ds))
		unlimitedAt := make([]bool, len(ds))
		wantErr := ""
		switch {
		case len(ds) == 0:
			wantErr = "must not be empty"
		case len(ds) > DefaultMaxDescriptors:
			for i := range refused {
				refused[i] = true
			}
		}
		for i, d := range ds {
			entries := entriesOf(d)
			m := e.cfg.Match(domain, entries)
			node, plan := naiveMatch(e.cfg, domain, entries)
			checkMatch(t, e.cfg, entries, m, node, plan)
			if wantErr != "" || refused[i] || len(entries) == 0 {
				continue
			}
			if len(entries) > DefaultMaxEntries {
				refused[i] = true
				continue
			}
			shared := slices.Clone(entries)
			e.cfg.MatchShared(domain, shared)
			checkKey(t, shared, storeKey(shared))
			for j, n := range sharedNodes(e.cfg, domain, entries) {
				if n != nil && shared[j].Value != n.Value || n == nil && shared[j] != entries[j] {
					t.Fatalf("MatchShared(%q) wrote %q", entries, shared)
				}
			}
			unlimitedAt[i] = m.Unlimited
			if !m.Unlimited && len(m.Limits) > 0 {
				matched[i] = m.Limits
			}
		}

		resp, err := e.srv.ShouldRateLimit(context.Background(), req)
		e.clock.Advance(1500 * time.Millisecond) // let limits refill now and then
		if wantErr != "" {
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("ShouldRateLimit(%v) = %v, %v; want InvalidArgument mentioning %q", req, resp, err, wantErr)
			}
			return
		}
		if err != nil {
			t.Fatalf("ShouldRateLimit(%v): %v", req, err)
		}
		checkResponse(t, e.cfg, req, resp)
		// Each status reports one of its descriptor's limits that no other
		// matched limit replaces (by its YAML name, which may be empty), and
		// has one exactly when there is such a limit. A refused descriptor is
		// OVER_LIMIT without one; an unlimited one OK with 4294967295 left.
		var all []*config.Policy
		for _, ps := range matched {
			all = append(all, ps...)
		}
		for i, st := range resp.Statuses {
			switch {
			case refused[i]:
				if st.Code != codeOverLimit || st.CurrentLimit != nil || resp.OverallCode != codeOverLimit {
					t.Fatalf("status %d of %v: %v, want a refusal", i, req, st)
				}
				continue
			case unlimitedAt[i]:
				if st.Code != codeOK || st.CurrentLimit != nil || st.LimitRemaining != math.MaxUint32 {
					t.Fatalf("status %d of %v: %v, want unlimited", i, req, st)
				}
				continue
			}
			var live []string
			for _, p := range matched[i] {
				if !replaced(p, all) {
					live = append(live, p.RuleName)
				}
			}
			name := st.GetCurrentLimit().GetName()
			if len(live) == 0 && st.CurrentLimit != nil || len(live) > 0 && (st.CurrentLimit == nil || !slices.Contains(live, name)) {
				t.Fatalf("status %d of %v reports %v, want one of %q", i, req, st.GetCurrentLimit(), live)
			}
		}
	})
}

// FuzzRequest: any bytes that decode as a RateLimitRequest (strings that are
// not UTF-8 included) get a well-formed response, whatever their size; only a
// request without a domain or descriptors is refused with InvalidArgument:
// never a panic, never another code.
func FuzzRequest(f *testing.F) {
	e := newFuzzEnv(f, WithHeaders(true), WithLimitHeaders(DefaultLimitHeaderNames))
	for _, req := range fuzzRequestSeeds() {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeRequest(data)
		strict := &rlsv3.RateLimitRequest{}
		if strictErr := proto.Unmarshal(data, strict); strictErr == nil && (err != nil || !proto.Equal(req, strict)) {
			t.Fatalf("decodeRequest(%q) = %v, %v; the generated code says %v", data, req, err, strict)
		}
		// The lenient decoder reads what the generated code reads.
		known := &rlsv3.RateLimitRequest{}
		if (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, known) == nil {
			if lenient, err := decodeLenient(data); err != nil || !proto.Equal(lenient, known) {
				t.Fatalf("decodeLenient(%q) = %v, %v; the generated code says %v", data, lenient, err, known)
			}
		}
		if err != nil {
			return
		}
		resp, err := e.srv.ShouldRateLimit(context.Background(), req)
		e.clock.Advance(1500 * time.Millisecond)
		if req.GetDomain() == "" || len(req.GetDescriptors()) == 0 {
			if st, ok := status.FromError(err); !ok || st.Code() != codes.InvalidArgument || st.Message() == "" {
				t.Fatalf("ShouldRateLimit(%v): %v, %v; want InvalidArgument", req, resp, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("ShouldRateLimit(%v): %v, want a decision", req, err)
		}
		checkResponse(t, e.cfg, req, resp)
		if len(req.GetDescriptors()) > DefaultMaxDescriptors && resp.OverallCode != codeOverLimit {
			t.Fatalf("ShouldRateLimit(%v) admitted a request over the descriptor cap", req)
		}
		for i, d := range req.GetDescriptors() {
			if len(d.GetEntries()) > DefaultMaxEntries && resp.Statuses[i].Code != codeOverLimit {
				t.Fatalf("ShouldRateLimit(%v) admitted descriptor %d with %d entries", req, i, len(d.GetEntries()))
			}
		}
	})
}

// fuzzRequestSeeds are FuzzRequest's f.Add seeds; testdata/fuzz/FuzzRequest
// holds more.
func fuzzRequestSeeds() []*rlsv3.RateLimitRequest {
	return []*rlsv3.RateLimitRequest{
		{Domain: "fuzz", Descriptors: descs(desc("k", "exact"), desc("k", "example"), desc("a", "1", "b", "x"))},
		{Domain: "fuzz", HitsAddend: 3, Descriptors: descs(withHits(desc("a", "1", "b", "y", "c", "deep"), 2), desc("w", `w|\`))},
		{Domain: "edge_proxy", Descriptors: descs(desc("remote_address", "10.0.0.1"), withOverride(desc("client_id", "c", "path", "/x"), 5, typev3.RateLimitUnit_MINUTE, 10))},
		{Domain: "api_gateway", Descriptors: descs(desc("api_key", "k"), desc("tenant", "t", "path", "/v1/reports/x"))},
	}
}
