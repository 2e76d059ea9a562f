package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/testwait"
)

// TestRatelimitEnvDefaults: each of envoyproxy/ratelimit's variables serve
// honours becomes the default of the flag that means the same, as ratelimit
// reads it (its defaults for what is left out); a value ratelimit would
// refuse, or one Sluice cannot serve, is a problem of that flag.
func TestRatelimitEnvDefaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    map[string]string // flag → default
		problem map[string]string // flag → part of its problem
	}{
		{"nothing set", map[string]string{}, map[string]string{}, nil},
		{"ports", map[string]string{"PORT": "9080", "GRPC_PORT": "9081"},
			map[string]string{"http-addr": ":9080", "grpc-addr": ":9081", "health-addr": ""}, nil},
		{"grpc port only", map[string]string{"GRPC_PORT": "9081"},
			map[string]string{"grpc-addr": ":9081", "health-addr": ""}, nil},
		{"hosts and ports", map[string]string{"HOST": "127.0.0.1", "PORT": "9080", "GRPC_HOST": "::1"},
			map[string]string{"http-addr": "127.0.0.1:9080", "grpc-addr": "[::1]:8081", "health-addr": ""}, nil},
		{"debug port: loopback", map[string]string{"DEBUG_PORT": "6071"}, map[string]string{"debug-addr": "127.0.0.1:6071"}, nil},
		{"debug host", map[string]string{"DEBUG_HOST": "0.0.0.0"}, map[string]string{"debug-addr": "0.0.0.0:6070"}, nil},
		{"bad debug port", map[string]string{"DEBUG_PORT": "debug"}, map[string]string{"debug-addr": "127.0.0.1:debug"},
			map[string]string{"debug-addr": `DEBUG_PORT="debug": want a port number`}},
		{"bad port", map[string]string{"PORT": "http"}, map[string]string{"http-addr": ":http", "health-addr": ""},
			map[string]string{"http-addr": `PORT="http": want a port number`}},
		{"logs", map[string]string{"LOG_LEVEL": "WARNING", "LOG_FORMAT": "JSON"},
			map[string]string{"log-level": "warn", "log-format": "json"}, nil},
		{"trace and text", map[string]string{"LOG_LEVEL": "trace", "LOG_FORMAT": "logfmt"},
			map[string]string{"log-level": "debug", "log-format": "text"}, nil},
		{"bad level", map[string]string{"LOG_LEVEL": "loud"}, map[string]string{"log-level": ""},
			map[string]string{"log-level": `LOG_LEVEL="loud"`}},
		{"connection age", map[string]string{"GRPC_MAX_CONNECTION_AGE": "24h", "GRPC_MAX_CONNECTION_AGE_GRACE": "1h"},
			map[string]string{"grpc-max-conn-age": "24h", "grpc-max-conn-age-grace": "1h"}, nil},
		{"bad age", map[string]string{"GRPC_MAX_CONNECTION_AGE": "a day"}, map[string]string{"grpc-max-conn-age": "a day"},
			map[string]string{"grpc-max-conn-age": "want a duration"}},
		{"switches", map[string]string{"CACHE_KEY_PREFIX": "rl:", "RESPONSE_DYNAMIC_METADATA": "true",
			"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION": "1", "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED": "TRUE",
			"FORCE_START_WITHOUT_INITIAL_CONFIG": "true"},
			map[string]string{"store-key-prefix": "rl:", "rls-dynamic-metadata": "true", "healthcheck-store": "true",
				"healthcheck-domains": "true", "start-without-config": "true", "xds-wait": "0s"}, nil},
		{"global modes", map[string]string{"SHADOW_MODE": "true", "QUOTA_MODE": "1"},
			map[string]string{"shadow-mode": "true", "quota-mode": "true"}, nil},
		{"global modes off", map[string]string{"SHADOW_MODE": "false", "QUOTA_MODE": "0"},
			map[string]string{"shadow-mode": "false", "quota-mode": "false"}, nil},
		{"bad switch", map[string]string{"RESPONSE_DYNAMIC_METADATA": "yes"}, map[string]string{"rls-dynamic-metadata": "false"},
			map[string]string{"rls-dynamic-metadata": `RESPONSE_DYNAMIC_METADATA="yes": want true or false`}},
		{"redis defaults: nutcracker's socket", map[string]string{"REDIS_SOCKET_TYPE": "unix"},
			map[string]string{"store": "unix:///var/run/nutcracker/ratelimit.sock"}, nil},
		{"redis tcp", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379"},
			map[string]string{"store": "redis://redis:6379"}, nil},
		{"redis password", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379", "REDIS_AUTH": "s3cr@t"},
			map[string]string{"store": "redis://:s3cr%40t@redis:6379"}, nil},
		{"redis user and password", map[string]string{"REDIS_SOCKET_TYPE": "TCP", "REDIS_URL": "redis:6379", "REDIS_AUTH": "rl:pw"},
			map[string]string{"store": "redis://rl:pw@redis:6379"}, nil},
		{"redis tls", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6380", "REDIS_TLS": "true"},
			map[string]string{"store": "rediss://redis:6380"}, nil},
		{"sentinel", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "SENTINEL", "REDIS_URL": "mymaster,s1:26379,s2:26379"},
			map[string]string{"store": "redis://s1:26379?addr=s2%3A26379&master_set=mymaster"}, nil},
		{"cluster", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "cluster", "REDIS_URL": "n1:7000, n2:7001,n3:7002"},
			map[string]string{"store": "redis://n1:7000?addr=n2%3A7001&addr=n3%3A7002"}, nil},
		{"cluster over a socket", map[string]string{"REDIS_TYPE": "cluster", "REDIS_URL": "n1:7000"}, map[string]string{"store": ""},
			map[string]string{"store": "REDIS_SOCKET_TYPE=unix with REDIS_TYPE=cluster"}},
		{"single of several", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "a:1,b:2"}, map[string]string{"store": ""},
			map[string]string{"store": "REDIS_TYPE=single takes one host:port"}},
		{"per second: nutcracker's socket", map[string]string{"REDIS_PERSECOND": "true"},
			map[string]string{"store-per-second": "unix:///var/run/nutcracker/ratelimitpersecond.sock"}, nil},
		{"per second", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:6379", "REDIS_PERSECOND": "true",
			"REDIS_PERSECOND_SOCKET_TYPE": "tcp", "REDIS_PERSECOND_URL": "ps:6380", "REDIS_PERSECOND_AUTH": "pw", "REDIS_PERSECOND_TLS": "true"},
			map[string]string{"store": "redis://r:6379", "store-per-second": "rediss://:pw@ps:6380"}, nil},
		{"per second cluster", map[string]string{"REDIS_PERSECOND": "1", "REDIS_PERSECOND_SOCKET_TYPE": "tcp",
			"REDIS_PERSECOND_TYPE": "cluster", "REDIS_PERSECOND_URL": "n1:7000,n2:7001"},
			map[string]string{"store-per-second": "redis://n1:7000?addr=n2%3A7001"}, nil},
		{"per second off", map[string]string{"REDIS_PERSECOND": "false", "REDIS_PERSECOND_URL": "ps:6380"}, map[string]string{}, nil},
		{"per second unsure", map[string]string{"REDIS_PERSECOND": "yes"}, map[string]string{"store-per-second": ""},
			map[string]string{"store-per-second": `REDIS_PERSECOND="yes": want true or false`}},
		{"per second bad type", map[string]string{"REDIS_PERSECOND": "true", "REDIS_PERSECOND_SOCKET_TYPE": "tcp", "REDIS_PERSECOND_TYPE": "ring"},
			map[string]string{"store-per-second": ""}, map[string]string{"store-per-second": `REDIS_PERSECOND_TYPE="ring": want single, sentinel or cluster`}},
		{"memcache", map[string]string{"BACKEND_TYPE": "memcache", "MEMCACHE_HOST_PORT": "m:11211"}, map[string]string{"store": ""},
			map[string]string{"store": "BACKEND_TYPE=memcache: Sluice has no memcache store"}},
		{"grpc tls", map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/c.pem", "GRPC_SERVER_TLS_KEY": "/k.pem",
			"GRPC_CLIENT_TLS_CACERT": "/ca.pem", "GRPC_CLIENT_TLS_SAN": "envoy"},
			map[string]string{"grpc-tls-cert-file": "/c.pem", "grpc-tls-key-file": "/k.pem", "grpc-tls-client-ca-file": "/ca.pem", "grpc-tls-client-san": "envoy"}, nil},
		{"grpc tls off", map[string]string{"GRPC_SERVER_USE_TLS": "false", "GRPC_SERVER_TLS_CERT": "/c.pem"}, map[string]string{}, nil},
		{"grpc tls without files", map[string]string{"GRPC_SERVER_USE_TLS": "true"},
			map[string]string{"grpc-tls-cert-file": "", "grpc-tls-key-file": "", "grpc-tls-client-ca-file": "", "grpc-tls-client-san": ""},
			map[string]string{"grpc-tls-cert-file": "needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY"}},
	} {
		e := readRatelimitEnv(envLookup(tc.env))
		if !reflect.DeepEqual(e.defaults, tc.want) {
			t.Errorf("%s: defaults %v, want %v", tc.name, e.defaults, tc.want)
		}
		if len(e.problems) != len(tc.problem) {
			t.Errorf("%s: problems %v, want %v", tc.name, e.problems, tc.problem)
		}
		for flag, part := range tc.problem {
			if !strings.Contains(e.problems[flag], part) {
				t.Errorf("%s: --%s's problem %q, want it to say %q", tc.name, flag, e.problems[flag], part)
			}
		}
	}
	// REDIS_TLS's files go with the URL they came with.
	e := readRatelimitEnv(envLookup(map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:6380", "REDIS_TLS": "true",
		"REDIS_TLS_CACERT": "/ca.pem", "REDIS_TLS_CLIENT_CERT": "/c.pem", "REDIS_TLS_CLIENT_KEY": "/k.pem"}))
	want := &config.TLS{CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem"}
	if got := e.usedStoreTLS("rediss://r:6380"); !reflect.DeepEqual(got, want) {
		t.Errorf("store TLS %+v, want %+v", got, want)
	}
	if got := e.usedStoreTLS("rediss://other:6380"); got != nil {
		t.Errorf("store TLS %+v for a URL --store gave", got)
	}
}

// serveFlagsIn parses serve's flags with args in the environment env (the
// process's own is set for the test).
func serveFlagsIn(t *testing.T, env map[string]string, args ...string) (serveOptions, int, string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var o serveOptions
	var stderr strings.Builder
	fs := newServeFlags(&o, &stderr)
	if code := cli.ParseFlags(fs, args); code >= 0 {
		return o, code, stderr.String()
	}
	if code := applyEnv(fs, os.LookupEnv); code >= 0 {
		return o, code, stderr.String()
	}
	return o, o.rl.env.check(fs, os.LookupEnv, &stderr), stderr.String()
}

// TestRatelimitEnvPrecedence: a flag wins over its SLUICE_* variable, which
// wins over ratelimit's; a problem with ratelimit's variable stops serve
// only when nothing overrides it, and names the variable and the way out.
func TestRatelimitEnvPrecedence(t *testing.T) {
	env := map[string]string{"PORT": "9080", "LOG_LEVEL": "debug", "REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:6379", "SHADOW_MODE": "true"}
	t.Run("ratelimit's", func(t *testing.T) {
		o, code, _ := serveFlagsIn(t, env)
		if code >= 0 || o.httpAddr != ":9080" || o.logLevel != "debug" || o.storeURL != "redis://r:6379" || !o.rl.modes.Shadow {
			t.Fatalf("exit %d, %+v", code, o)
		}
	})
	t.Run("SLUICE_* and flags", func(t *testing.T) {
		t.Setenv("SLUICE_HTTP_ADDR", "127.0.0.1:7000")
		t.Setenv("SLUICE_STORE", "memory://")
		o, _, _ := serveFlagsIn(t, env, "--log-level", "error", "--shadow-mode=false")
		if o.httpAddr != "127.0.0.1:7000" || o.storeURL != "memory://" || o.logLevel != "error" || o.rl.modes.Shadow {
			t.Fatalf("%+v", o)
		}
	})
	bad := map[string]string{"BACKEND_TYPE": "memcache", "GRPC_PORT": "grpc"}
	t.Run("problems", func(t *testing.T) {
		if _, code, stderr := serveFlagsIn(t, bad); code != 2 ||
			!strings.Contains(stderr, "BACKEND_TYPE=memcache: Sluice has no memcache store") || !strings.Contains(stderr, "--store or SLUICE_STORE overrides it") ||
			!strings.Contains(stderr, `GRPC_PORT="grpc": want a port number`) {
			t.Fatalf("exit %d: %q", code, stderr)
		}
	})
	t.Run("problems overridden", func(t *testing.T) {
		if _, code, stderr := serveFlagsIn(t, bad, "--store", "memory://", "--grpc-addr", ""); code >= 0 {
			t.Fatalf("exit %d %q", code, stderr)
		}
	})
}

// TestRatelimitIgnoredVariables: the variables serve ignores are named, each
// with what Sluice does instead, when they are set (to a value that matters:
// USE_STATSD=false asks for nothing Sluice does); and docs/service.md's
// migration table has a row for every variable ratelimit reads.
func TestRatelimitIgnoredVariables(t *testing.T) {
	got := ignoredVariables(envLookup(map[string]string{"USE_STATSD": "true", "STATSD_HOST": "statsd", "NEAR_LIMIT_RATIO": "0.9",
		"LOCAL_CACHE_SIZE_IN_BYTES": "1000", "REDIS_PERSECOND": "false", "REDIS_PERSECOND_URL": "r2:6379", "REDIS_PERSECOND_POOL_SIZE": "5", "SHADOW_MODE": "false",
		"PORT": "8080", "REDIS_URL": "r:6379"}))
	var names []string
	for _, g := range got {
		name, instead, _ := strings.Cut(g, ": ")
		if instead == "" {
			t.Errorf("%q says nothing of what Sluice does instead", g)
		}
		names = append(names, name)
	}
	want := []string{"USE_STATSD", "STATSD_HOST", "LOCAL_CACHE_SIZE_IN_BYTES", "NEAR_LIMIT_RATIO", "REDIS_PERSECOND_POOL_SIZE"}
	if !sameSet(names, want) {
		t.Fatalf("ignored %v, want %v", names, want)
	}
	if got := ignoredVariables(envLookup(map[string]string{"USE_STATSD": "false", "PORT": "8080"})); len(got) != 0 {
		t.Fatalf("ignored %v, want none", got)
	}

	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "service.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, v := range ratelimitIgnored {
		seen[v.name] = true
	}
	for _, name := range ratelimitHonoured {
		if seen[name] && name != "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION" {
			t.Errorf("%s is both honoured and ignored", name)
		}
		seen[name] = true
	}
	// The first column of the table's rows names the variables.
	documented := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if cols := strings.Split(line, " | "); strings.HasPrefix(line, "| `") && len(cols) > 1 {
			for _, v := range strings.Split(strings.TrimPrefix(cols[0], "| "), ", ") {
				documented[strings.Trim(v, "`")] = true
			}
		}
	}
	for name := range seen {
		if !documented[name] {
			t.Errorf("docs/service.md has no row for %s", name)
		}
	}
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

// TestStartWithoutConfig: with --start-without-config (ratelimit's
// FORCE_START_WITHOUT_INITIAL_CONFIG) serve starts on an empty
// configuration directory, which it refuses otherwise; /healthcheck with
// --healthcheck-domains fails until a file brings a domain, which is then
// in force without a restart.
func TestStartWithoutConfig(t *testing.T) {
	dir := t.TempDir()
	logs := &syncBuffer{}
	log, _ := newLogger(logs, "text", "info")
	o := serveOptions{configs: cli.StringList{dir}, httpAddr: "127.0.0.1:0", grpcAddr: "", shutdown: waitLimit}
	if _, err := startServer(context.Background(), o, log); err == nil || !strings.Contains(err.Error(), "holds no") {
		t.Fatalf("an empty directory without --start-without-config: %v", err)
	}
	o.rl = ratelimitOptions{startEmpty: true, health: httpapi.Healthcheck{Domains: true}}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := startServer(ctx, o, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.wait() })
	base := "http://" + srv.httpAddr.String()
	if code, body := get(t, base+"/healthcheck"); code != 500 || !strings.Contains(body, "no rate limit domain loaded") {
		t.Fatalf("/healthcheck with no domain: %d %q", code, body)
	}
	writeFile(t, filepath.Join(dir, "edge.yaml"), envoyConfig)
	testwait.UntilSaw(t, "the file written after the start taken", func() (bool, string) {
		code, _ := get(t, base+"/healthcheck")
		return code == 200, "\n" + logs.String()
	})
	if _, ok := srv.svc.Config().Domains["edge"]; !ok {
		t.Fatal("healthy without the domain")
	}
}
