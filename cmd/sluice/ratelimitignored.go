package main

import (
	"strconv"
	"strings"
)

// ratelimitVariable is one of envoyproxy/ratelimit's variables that serve
// does not honour, at least with some values: what Sluice does instead.
type ratelimitVariable struct {
	name    string
	when    func(string) bool // ignored only for these values; nil: any
	instead string
}

func isTrue(v string) bool { b, _ := strconv.ParseBool(strings.TrimSpace(v)); return b }
func isFalse(v string) bool {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	return err == nil && !b
}

const (
	insteadMetrics = "Sluice exports Prometheus metrics at /metrics on the HTTP port"
	insteadRedis   = "rueidis pipelines and multiplexes on its own; per-call timeouts are store.timeout (adaptive by default)"
	insteadXDS     = "Sluice's xDS client reconnects with its own backoff"
	insteadTracing = "tracing is configured with the standard OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_SAMPLER…)"
	insteadMemcach = "Sluice has no memcache store"
)

// ratelimitIgnored are ratelimit's variables serve does not honour (the
// others are mapped by readRatelimitEnv), each with what Sluice does
// instead. docs/service.md's migration table has a row for every variable.
var ratelimitIgnored = []ratelimitVariable{
	{"PROTO", nil, "Sluice listens on TCP"},
	{"GRPC_UDS", nil, "Sluice serves gRPC on TCP only (GRPC_HOST, GRPC_PORT, or --grpc-addr)"},
	{"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", nil, insteadXDS},
	{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", nil, "no extra headers are sent to the xDS server"},
	{"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", nil, insteadXDS},
	{"XDS_CLIENT_BACKOFF_MAX_INTERVAL", nil, insteadXDS},
	{"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", nil, insteadXDS},
	{"XDS_CLIENT_BACKOFF_JITTER", nil, insteadXDS},
	{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", nil, "the xDS client takes gRPC's default message size"},
	{"USE_STATSD", isTrue, insteadMetrics},
	{"STATSD_HOST", nil, insteadMetrics},
	{"STATSD_PORT", nil, insteadMetrics},
	{"USE_DOG_STATSD", isTrue, insteadMetrics},
	{"USE_DOG_STATSD_MOGRIFIERS", nil, insteadMetrics},
	{"EXTRA_TAGS", nil, insteadMetrics + " (add labels when scraping)"},
	{"STATS_FLUSH_INTERVAL", nil, insteadMetrics + ", read when scraped"},
	{"DISABLE_STATS", isTrue, insteadMetrics + ", read only when scraped"},
	{"USE_PROMETHEUS", isTrue, insteadMetrics},
	{"PROMETHEUS_ADDR", nil, insteadMetrics},
	{"PROMETHEUS_PATH", nil, insteadMetrics},
	{"PROMETHEUS_MAPPER_YAML", nil, insteadMetrics + ", named sluice_*"},
	{"RUNTIME_IGNOREDOTFILES", isFalse, "dot files are always skipped"},
	{"MERGE_DOMAIN_CONFIG", isTrue, "a domain must be in one file"},
	{"EXPIRATION_JITTER_MAX_SECONDS", nil, "a key expires when its state is back to unused"},
	{"LOCAL_CACHE_SIZE_IN_BYTES", nil, "no cache of over-limit keys: store.lease decides locally from leased quota, and store.max_keys bounds the memory store"},
	{"NEAR_LIMIT_RATIO", nil, "no near-limit count: sluice_decisions_total counts allowed and denied decisions per policy"},
	{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", isFalse, "a denied request is never charged"},
	{"REDIS_POOL_SIZE", nil, insteadRedis},
	{"REDIS_PIPELINE_WINDOW", nil, insteadRedis},
	{"REDIS_PIPELINE_LIMIT", nil, insteadRedis},
	{"REDIS_USE_EXPLICIT_PIPELINE", nil, insteadRedis},
	{"REDIS_TIMEOUT", nil, insteadRedis},
	{"REDIS_POOL_ON_EMPTY_BEHAVIOR", nil, insteadRedis},
	{"REDIS_SENTINEL_AUTH", nil, "the sentinels are reached without a password"},
	{"REDIS_PERSECOND_SENTINEL_AUTH", nil, "the sentinels are reached without a password"},
	{"REDIS_PERSECOND_POOL_SIZE", nil, insteadRedis},
	{"REDIS_PERSECOND_PIPELINE_WINDOW", nil, insteadRedis},
	{"REDIS_PERSECOND_PIPELINE_LIMIT", nil, insteadRedis},
	{"REDIS_PERSECOND_USE_EXPLICIT_PIPELINE", nil, insteadRedis},
	{"REDIS_PERSECOND_TIMEOUT", nil, insteadRedis},
	{"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", nil, insteadRedis},
	{"MEMCACHE_HOST_PORT", nil, insteadMemcach},
	{"MEMCACHE_MAX_IDLE_CONNS", nil, insteadMemcach},
	{"MEMCACHE_SRV", nil, insteadMemcach},
	{"MEMCACHE_SRV_REFRESH", nil, insteadMemcach},
	{"MEMCACHE_TLS", nil, insteadMemcach},
	{"MEMCACHE_TLS_CLIENT_CERT", nil, insteadMemcach},
	{"MEMCACHE_TLS_CLIENT_KEY", nil, insteadMemcach},
	{"MEMCACHE_TLS_CACERT", nil, insteadMemcach},
	{"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", nil, insteadMemcach},
	{"TRACING_ENABLED", isTrue, insteadTracing},
	{"TRACING_SERVICE_NAME", nil, insteadTracing},
	{"TRACING_SERVICE_NAMESPACE", nil, insteadTracing},
	{"TRACING_SERVICE_INSTANCE_ID", nil, insteadTracing},
	{"TRACING_EXPORTER_PROTOCOL", nil, insteadTracing},
	{"TRACING_SAMPLING_RATE", nil, insteadTracing},
	// Honoured, with a caveat worth saying at start.
	{"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", isTrue, "honoured by skipping the whole certificate verification, not the name alone"},
}

// ratelimitHonoured are ratelimit's variables serve honours (mapped to a
// flag, or read as ratelimit reads them), for docs/service.md's table.
var ratelimitHonoured = []string{
	"HOST", "PORT", "GRPC_HOST", "GRPC_PORT", "GRPC_MAX_CONNECTION_AGE", "GRPC_MAX_CONNECTION_AGE_GRACE",
	"GRPC_SERVER_USE_TLS", "GRPC_SERVER_TLS_CERT", "GRPC_SERVER_TLS_KEY", "GRPC_CLIENT_TLS_CACERT", "GRPC_CLIENT_TLS_SAN",
	"LOG_LEVEL", "LOG_FORMAT", "CONFIG_TYPE", "FORCE_START_WITHOUT_INITIAL_CONFIG",
	"CONFIG_GRPC_XDS_NODE_ID", "CONFIG_GRPC_XDS_NODE_METADATA", "CONFIG_GRPC_XDS_SERVER_URL",
	"CONFIG_GRPC_XDS_SERVER_USE_TLS", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
	"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "CONFIG_GRPC_XDS_SERVER_TLS_SAN",
	"RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY", "RUNTIME_WATCH_ROOT",
	"CACHE_KEY_PREFIX", "BACKEND_TYPE", "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
	"LIMIT_RESPONSE_HEADERS_ENABLED", "LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER",
	"REDIS_SOCKET_TYPE", "REDIS_TYPE", "REDIS_URL", "REDIS_AUTH", "REDIS_TLS",
	"REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY", "REDIS_TLS_CACERT",
	"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "RESPONSE_DYNAMIC_METADATA", "SHADOW_MODE", "QUOTA_MODE",
	"REDIS_PERSECOND", "REDIS_PERSECOND_SOCKET_TYPE", "REDIS_PERSECOND_TYPE", "REDIS_PERSECOND_URL",
	"REDIS_PERSECOND_AUTH", "REDIS_PERSECOND_TLS", "DEBUG_HOST", "DEBUG_PORT",
}

// ignoredVariables are the ignored variables lookup finds set, each as
// "NAME: what Sluice does instead".
func ignoredVariables(lookup func(string) (string, bool)) []string {
	var out []string
	for _, v := range ratelimitIgnored {
		if val, ok := lookup(v.name); ok && (v.when == nil || v.when(val)) {
			out = append(out, v.name+": "+v.instead)
		}
	}
	return out
}
