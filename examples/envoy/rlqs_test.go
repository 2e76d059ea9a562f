package envoy

import (
	"testing"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3" // the header input's type

	"github.com/sluicehq/sluice/internal/config"
)

// TestRLQSSnippet: the rate_limit_quota filter of docs/gateways.md is valid
// by Envoy's rules, calls the sluice cluster of examples/envoy/envoy.yaml,
// and builds bucket ids of a policy examples/sluice.yaml defines and a key.
func TestRLQSSnippet(t *testing.T) {
	docs := yamlBlocks(t, "Envoy's rate limit quota filter")
	if len(docs) != 1 {
		t.Fatalf("want one filter, got %d documents", len(docs))
	}
	var f hcmv3.HttpFilter
	decodeInto(t, "the rate_limit_quota filter", docs[0], &f)
	var q rlqsv3.RateLimitQuotaFilterConfig
	typedConfig(t, "the rate_limit_quota filter", f.GetTypedConfig(), &q)
	if f.GetName() != "envoy.filters.http.rate_limit_quota" || q.GetDomain() == "" {
		t.Errorf("filter %s for domain %q: want envoy.filters.http.rate_limit_quota with a domain", f.GetName(), q.GetDomain())
	}
	if got := q.GetRlqsServer().GetEnvoyGrpc().GetClusterName(); got != "sluice" {
		t.Errorf("the RLQS server is cluster %q, want sluice", got)
	}
	var settings rlqsv3.RateLimitQuotaBucketSettings
	typedConfig(t, "the bucket settings", q.GetBucketMatchers().GetOnNoMatch().GetAction().GetTypedConfig(), &settings)
	if err := validateDeep(&settings); err != nil {
		t.Fatal(err)
	}
	id := settings.GetBucketIdBuilder().GetBucketIdBuilder()
	if len(id) != 2 || id["key"].GetCustomValue() == nil {
		t.Fatalf("bucket id %v: want exactly policy and key, the key from the request", id)
	}
	cfg, err := config.Load(repoFile("examples/sluice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if p := id["policy"].GetStringValue(); cfg.Policy(p) == nil {
		t.Errorf("policy %q is not in examples/sluice.yaml", p)
	}
	if settings.GetReportingInterval().AsDuration() <= 0 {
		t.Error("want a reporting_interval")
	}
}
