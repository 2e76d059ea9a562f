package envoy

import (
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/sluicehq/sluice/internal/envoyrls"
)

// envoyExample is the Envoy configuration this test loads.
const envoyExample = "examples/envoy/envoy.yaml"

// TestEnvoyExample loads examples/envoy/envoy.yaml as an Envoy bootstrap,
// checks it by Envoy's validation rules, and checks that it reaches Sluice
// (HTTP/2 to its gRPC port, its health service) and sends descriptors the
// example rate limit configuration limits, in its domain.
func TestEnvoyExample(t *testing.T) {
	docs := yamlDocs(t, envoyExample, readFile(t, envoyExample))
	if len(docs) != 1 {
		t.Fatalf("%s: %d YAML documents, want 1", envoyExample, len(docs))
	}
	var b bootstrapv3.Bootstrap
	decodeInto(t, envoyExample, docs[0], &b)
	cfg, domain := loadRatelimitExample(t)

	clusters := map[string]*clusterv3.Cluster{}
	for _, c := range b.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = c
	}
	listeners := b.GetStaticResources().GetListeners()
	if len(listeners) != 1 || len(listeners[0].GetFilterChains()) != 1 || len(listeners[0].GetFilterChains()[0].GetFilters()) != 1 {
		t.Fatalf("want one listener with one filter chain of one filter, the HTTP connection manager")
	}
	var hcm hcmv3.HttpConnectionManager
	typedConfig(t, "the listener's filter", listeners[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig(), &hcm)

	// The filter: Sluice's domain, a timeout chosen, Sluice's cluster.
	var rl ratelimitv3.RateLimit
	typedConfig(t, "envoy.filters.http.ratelimit", httpFilter(t, &hcm, "envoy.filters.http.ratelimit").GetTypedConfig(), &rl)
	if rl.GetDomain() != domain {
		t.Errorf("the filter's domain %q; %s's is %q", rl.GetDomain(), ratelimitExample, domain)
	}
	if rl.GetTimeout().AsDuration() <= 0 {
		t.Error("the filter has no timeout: Envoy's 20ms default is below Sluice's store timeout")
	}
	if rl.GetRateLimitService().GetTransportApiVersion() != corev3.ApiVersion_V3 {
		t.Error("rate_limit_service: transport_api_version is not V3")
	}
	if n := len(hcm.GetHttpFilters()); hcm.GetHttpFilters()[n-1].GetName() != "envoy.filters.http.router" {
		t.Error("the router is not the last HTTP filter")
	}
	name := rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()
	sluice := clusters[name]
	if sluice == nil {
		t.Fatalf("rate_limit_service names cluster %q, which is not defined", name)
	}
	checkSluiceCluster(t, sluice, "127.0.0.1", sluiceGRPCPort(t))

	// Every route sends descriptors the domain limits.
	routes := 0
	for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if clusters[r.GetRoute().GetCluster()] == nil {
				t.Errorf("route %s: cluster %q is not defined", r.GetMatch().GetPrefix(), r.GetRoute().GetCluster())
			}
			routes++
			checkLimited(t, "route "+r.GetMatch().GetPrefix(), cfg, domain, r.GetRoute().GetRateLimits(), sampleRequest(r.GetMatch().GetPrefix()))
		}
	}
	if routes == 0 {
		t.Error("no routes")
	}
}

// checkSluiceCluster checks a cluster that reaches Sluice's gRPC port at
// host: HTTP/2, as gRPC needs, the port given, and, if it has active health
// checks, on the rate limit service's gRPC health.
func checkSluiceCluster(t *testing.T, c *clusterv3.Cluster, host string, port uint32) {
	t.Helper()
	opts, ok := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	var hpo upstreamhttpv3.HttpProtocolOptions
	if ok {
		typedConfig(t, "cluster "+c.GetName(), opts, &hpo)
	}
	if hpo.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Errorf("cluster %s does not speak HTTP/2 to Sluice: gRPC needs it", c.GetName())
	}
	eps := c.GetLoadAssignment().GetEndpoints()
	if len(eps) != 1 || len(eps[0].GetLbEndpoints()) != 1 {
		t.Fatalf("cluster %s: want one endpoint", c.GetName())
	}
	addr := eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if addr.GetAddress() != host || addr.GetPortValue() != port {
		t.Errorf("cluster %s reaches %s:%d, want Sluice's gRPC port %s:%d", c.GetName(), addr.GetAddress(), addr.GetPortValue(), host, port)
	}
	for _, hc := range c.GetHealthChecks() {
		if svc := hc.GetGrpcHealthCheck().GetServiceName(); hc.GetGrpcHealthCheck() == nil || svc != envoyrls.ServiceName {
			t.Errorf("cluster %s health check: want gRPC health of %s, got %v", c.GetName(), envoyrls.ServiceName, hc.GetHealthChecker())
		}
	}
}
