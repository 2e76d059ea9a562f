package envoy

import (
	"fmt"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// sluiceNamespace is where the snippets expect Sluice: the manifests'
// namespace when none is given.
const sluiceNamespace = "default"

// checkRateLimitFilter decodes an HTTP filter of a snippet, checks it as
// Envoy would, and checks that it is Sluice's rate limit filter for domain
// and calls cluster. It returns the filter's configuration.
func checkRateLimitFilter(t *testing.T, what string, v any, domain, cluster string) *ratelimitv3.RateLimit {
	t.Helper()
	var f hcmv3.HttpFilter
	decodeInto(t, what, v, &f)
	var rl ratelimitv3.RateLimit
	typedConfig(t, what, f.GetTypedConfig(), &rl)
	if f.GetName() != "envoy.filters.http.ratelimit" || rl.GetDomain() != domain {
		t.Errorf("%s: filter %s for domain %q; want envoy.filters.http.ratelimit for %q", what, f.GetName(), rl.GetDomain(), domain)
	}
	if got := rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName(); got != cluster {
		t.Errorf("%s: the rate limit service is cluster %q, want %q", what, got, cluster)
	}
	if rl.GetTimeout().AsDuration() <= 0 || rl.GetRateLimitService().GetTransportApiVersion() != corev3.ApiVersion_V3 {
		t.Errorf("%s: want a timeout and transport_api_version V3", what)
	}
	return &rl
}

// rateLimits decodes a snippet's list of rate_limits as Envoy would, in a
// virtual host (their home; its name and domains are the gateway's).
func rateLimits(t *testing.T, what string, v any) []*routev3.RateLimit {
	t.Helper()
	var vh routev3.VirtualHost
	decodeInto(t, what, map[string]any{"name": "gateway", "domains": []any{"*"}, "rate_limits": v}, &vh)
	return vh.GetRateLimits()
}

// TestIstioSnippet: the EnvoyFilter of docs/gateways.md adds Sluice's rate
// limit filter, calling the Service the manifests define, and rate_limits
// whose descriptors examples/envoy-ratelimit.yaml limits.
func TestIstioSnippet(t *testing.T) {
	cfg, domain := loadRatelimitExample(t)
	docs := yamlBlocks(t, "Istio")
	if len(docs) != 1 || docs[0]["kind"] != "EnvoyFilter" || docs[0]["apiVersion"] != "networking.istio.io/v1alpha3" {
		t.Fatalf("want one EnvoyFilter of networking.istio.io/v1alpha3, got %v", docs)
	}
	cluster := fmt.Sprintf("outbound|%d||sluice.%s.svc.cluster.local", sluiceServices(t)["sluice"], sluiceNamespace)
	var filters, descriptors int
	patches, _ := field(docs[0], "spec", "configPatches").([]any)
	for i, p := range patches {
		what := fmt.Sprintf("Istio configPatches[%d]", i)
		value := field(p, "patch", "value")
		switch field(p, "applyTo") {
		case "HTTP_FILTER":
			if field(p, "patch", "operation") != "INSERT_BEFORE" || field(p, "match", "listener", "filterChain", "filter", "subFilter", "name") != "envoy.filters.http.router" {
				t.Errorf("%s: want the filter inserted before the router", what)
			}
			checkRateLimitFilter(t, what, value, domain, cluster)
			filters++
		case "VIRTUAL_HOST":
			if field(p, "patch", "operation") != "MERGE" {
				t.Errorf("%s: want the rate_limits merged into the virtual hosts", what)
			}
			descriptors += checkLimited(t, what, cfg, domain, rateLimits(t, what, field(value, "rate_limits")), sampleRequest("/api/v1/orders/7"))
		default:
			t.Errorf("%s: unexpected applyTo %v", what, field(p, "applyTo"))
		}
	}
	if filters != 1 || descriptors == 0 {
		t.Errorf("want one rate limit filter and rate_limits, got %d and %d descriptors", filters, descriptors)
	}
}

// TestEnvoyGatewaySnippet: the Envoy Gateway configuration of
// docs/gateways.md turns EnvoyPatchPolicy on, and the policy adds a cluster
// for the manifests' headless Service over HTTP/2, Sluice's rate limit
// filter calling it, and rate_limits whose descriptors
// examples/envoy-ratelimit.yaml limits.
func TestEnvoyGatewaySnippet(t *testing.T) {
	cfg, domain := loadRatelimitExample(t)
	docs := yamlBlocks(t, "Envoy Gateway")
	if len(docs) != 2 || docs[0]["kind"] != "EnvoyGateway" || docs[1]["kind"] != "EnvoyPatchPolicy" {
		t.Fatalf("want an EnvoyGateway configuration and an EnvoyPatchPolicy, got %v", docs)
	}
	if field(docs[0], "extensionApis", "enableEnvoyPatchPolicy") != true {
		t.Error("the EnvoyGateway configuration does not turn on EnvoyPatchPolicy")
	}
	policy := docs[1]
	if field(policy, "spec", "type") != "JSONPatch" || field(policy, "spec", "targetRef", "kind") != "Gateway" {
		t.Errorf("want a JSONPatch policy on a Gateway, got %v", field(policy, "spec"))
	}
	clusters := map[string]bool{}
	var filters, descriptors int
	patches, _ := field(policy, "spec", "jsonPatches").([]any)
	for i, p := range patches {
		what := fmt.Sprintf("EnvoyPatchPolicy jsonPatches[%d]", i)
		if op := field(p, "operation", "op"); op != "add" {
			t.Errorf("%s: op %v, want add", what, op)
		}
		value := field(p, "operation", "value")
		switch field(p, "type") {
		case "type.googleapis.com/envoy.config.cluster.v3.Cluster":
			// A whole new resource: path "" adds it as it is.
			var c clusterv3.Cluster
			decodeInto(t, what, value, &c)
			if field(p, "operation", "path") != "" || field(p, "name") != c.GetName() {
				t.Errorf("%s: a new cluster is added whole (path \"\") under its own name", what)
			}
			checkSluiceCluster(t, &c, fmt.Sprintf("sluice-headless.%s.svc.cluster.local", sluiceNamespace), sluiceServices(t)["sluice-headless"])
			clusters[c.GetName()] = true
		case "type.googleapis.com/envoy.config.listener.v3.Listener":
			if field(p, "operation", "path") != "/default_filter_chain/filters/0/typed_config/http_filters/0" {
				t.Errorf("%s: want the filter added first among the HTTP connection manager's filters", what)
			}
			rl := checkRateLimitFilter(t, what, value, domain, "sluice_ratelimit")
			if !clusters[rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()] {
				t.Errorf("%s: the filter calls a cluster no earlier patch adds", what)
			}
			filters++
		case "type.googleapis.com/envoy.config.route.v3.RouteConfiguration":
			if field(p, "operation", "path") != "rate_limits" || field(p, "operation", "jsonPath") == nil {
				t.Errorf("%s: want rate_limits set on the virtual hosts jsonPath selects", what)
			}
			descriptors += checkLimited(t, what, cfg, domain, rateLimits(t, what, value), sampleRequest("/api/v1/orders/7"))
		default:
			t.Errorf("%s: unexpected type %v", what, field(p, "type"))
		}
	}
	if len(clusters) != 1 || filters != 1 || descriptors == 0 {
		t.Errorf("want a cluster, a rate limit filter and rate_limits; got %d, %d and %d descriptors", len(clusters), filters, descriptors)
	}
}
