package main

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/testwait"
)

// envLookup is an environment held in a map.
func envLookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// TestServeFlagsFromEnvironment: every serve flag can come from
// SLUICE_<FLAG>, a flag on the command line wins, and every flag is in the
// table of docs/service.md.
func TestServeFlagsFromEnvironment(t *testing.T) {
	defaultLimitNames, _ := envoyrls.LimitHeadersFromEnv(os.Getenv)
	env := map[string]string{
		"SLUICE_CONFIG":              "a.yaml, b.yaml",
		"SLUICE_STORE":               "redis://127.0.0.1:6379",
		"SLUICE_HTTP_ADDR":           "127.0.0.1:9",
		"SLUICE_GRPC_ADDR":           "",
		"SLUICE_ADMIN_TOKEN_FILE":    "/run/secrets/token",
		"SLUICE_RLS_HEADERS":         "true",
		"SLUICE_LOG_FORMAT":          "json",
		"SLUICE_LOG_LEVEL":           "debug",
		"SLUICE_SHUTDOWN_TIMEOUT":    "3s",
		"SLUICE_GRPC_STREAM_WORKERS": "7",
		"SLUICE_DRAIN":               "2s",
		"SLUICE_RLS_LIMIT_HEADERS":   "true",
		"SLUICE_HEALTH_ADDR":         "127.0.0.1:10",
		"SLUICE_ADMIN_ADDR":          "127.0.0.1:11",

		"SLUICE_GRPC_MAX_CONNS":            "11",
		"SLUICE_GRPC_MAX_STREAMS":          "12",
		"SLUICE_GRPC_HANDSHAKE_TIMEOUT":    "13s",
		"SLUICE_GRPC_IDLE_TIMEOUT":         "14s",
		"SLUICE_GRPC_MAX_CONN_AGE":         "15s",
		"SLUICE_GRPC_MAX_CONN_AGE_GRACE":   "16s",
		"SLUICE_GRPC_KEEPALIVE_MIN_TIME":   "17s",
		"SLUICE_GRPC_KEEPALIVE_TIME":       "18s",
		"SLUICE_HTTP_MAX_CONNS":            "19",
		"SLUICE_HTTP_READ_HEADER_TIMEOUT":  "20s",
		"SLUICE_HTTP_READ_TIMEOUT":         "21s",
		"SLUICE_HTTP_IDLE_TIMEOUT":         "22s",
		"SLUICE_HTTP_MAX_HEADER_BYTES":     "23",
		"SLUICE_GRPC_MAX_CONNS_PER_IP":     "24",
		"SLUICE_GRPC_RPC_TIMEOUT":          "25s",
		"SLUICE_HTTP_MAX_CONNS_PER_IP":     "26",
		"SLUICE_XDS_SERVER":                "xds.example:18000",
		"SLUICE_XDS_NODE_ID":               "edge-1",
		"SLUICE_XDS_NODE_METADATA":         "zone=a,tier=gold",
		"SLUICE_XDS_TLS":                   "true",
		"SLUICE_XDS_CA_FILE":               "/pki/ca.pem",
		"SLUICE_XDS_CERT_FILE":             "/pki/client.pem",
		"SLUICE_XDS_KEY_FILE":              "/pki/client.key",
		"SLUICE_XDS_SERVER_NAME":           "xds.internal",
		"SLUICE_XDS_WAIT":                  "9s",
		"SLUICE_STORE_KEY_PREFIX":          "team-a:",
		"SLUICE_RLS_DYNAMIC_METADATA":      "true",
		"SLUICE_HEALTHCHECK_STORE":         "true",
		"SLUICE_HEALTHCHECK_DOMAINS":       "true",
		"SLUICE_START_WITHOUT_CONFIG":      "true",
		"SLUICE_GRPC_TLS_CERT_FILE":        "/pki/server.pem",
		"SLUICE_GRPC_TLS_KEY_FILE":         "/pki/server.key",
		"SLUICE_GRPC_TLS_CLIENT_CA_FILE":   "/pki/clients.pem",
		"SLUICE_GRPC_TLS_CLIENT_SAN":       "envoy.internal",
		"SLUICE_XDS_MAX_BYTES":             "24",
		"SLUICE_MAX_DESCRIPTORS":           "25",
		"SLUICE_MAX_DESCRIPTOR_DEPTH":      "26",
		"SLUICE_STORE_PER_SECOND":          "redis://127.0.0.1:6380",
		"SLUICE_SHADOW_MODE":               "true",
		"SLUICE_QUOTA_MODE":                "true",
		"SLUICE_DEBUG_ADDR":                "127.0.0.1:12",
		"SLUICE_RLQS_MAX_BUCKETS":          "27",
		"SLUICE_RLQS_MAX_STREAMS":          "28",
		"SLUICE_RLQS_FIRST_REPORT_TIMEOUT": "29s",
	}
	want := serveOptions{
		configs: cli.StringList{"a.yaml", "b.yaml"}, storeURL: "redis://127.0.0.1:6379", httpAddr: "127.0.0.1:9",
		grpcAddr: "", healthAddr: "127.0.0.1:10", adminAddr: "127.0.0.1:11", debugAddr: "127.0.0.1:12", adminTokenFile: "/run/secrets/token", rlsHeaders: true, logFormat: "json",
		logLevel: "debug", shutdown: 3 * time.Second, streamWorkers: 7, drain: 2 * time.Second,
		rlsLimitHdrs: true, rlsLimitNames: defaultLimitNames,
		limits: &connLimits{
			grpcMaxConns: 11, grpcMaxStreams: 12, grpcHandshake: 13 * time.Second, grpcIdle: 14 * time.Second,
			grpcMaxAge: 15 * time.Second, grpcMaxAgeGrace: 16 * time.Second, grpcKeepaliveMin: 17 * time.Second,
			grpcKeepaliveTime: 18 * time.Second, httpMaxConns: 19, httpReadHeader: 20 * time.Second,
			httpRead: 21 * time.Second, httpIdle: 22 * time.Second, httpMaxHeaderBytes: 23,
			grpcMaxConnsPerIP: 24, grpcRPCTimeout: 25 * time.Second, httpMaxConnsPerIP: 26,
		},
		xds: xdsOptions{server: "xds.example:18000", nodeID: "edge-1", metadata: "zone=a,tier=gold", tls: true,
			caFile: "/pki/ca.pem", certFile: "/pki/client.pem", keyFile: "/pki/client.key", serverName: "xds.internal",
			wait: 9 * time.Second, maxBytes: 24},
		bounds: configBounds{descriptors: 25, depth: 26},
		rlqs:   rlqsOptions{maxBuckets: 27, maxStreams: 28, firstReport: 29 * time.Second},
		rl: ratelimitOptions{keyPrefix: "team-a:", perSecond: "redis://127.0.0.1:6380", modes: config.Modes{Shadow: true, Quota: true}, dynamicMetadata: true, health: httpapi.Healthcheck{Store: true, Domains: true},
			startEmpty: true, grpcTLS: grpcTLSOptions{certFile: "/pki/server.pem", keyFile: "/pki/server.key",
				clientCAFile: "/pki/clients.pem", clientSAN: "envoy.internal"}},
	}
	var o serveOptions
	fs := newServeFlags(&o, io.Discard)
	want.rl.env = o.rl.env // what the process environment holds, as read
	checkEnvFlags(t, fs, env, &o, &want, "service.md")

	// Flags on the command line win, each one separately.
	o = serveOptions{}
	fs = newServeFlags(&o, io.Discard)
	if code := cli.ParseFlags(fs, []string{"--config", "c.yaml", "--http-addr", ":1", "--grpc-stream-workers", "0"}); code >= 0 {
		t.Fatalf("parse: %d", code)
	}
	if code := applyEnv(fs, envLookup(env)); code >= 0 {
		t.Fatalf("applyEnv: %d", code)
	}
	if len(o.configs) != 1 || o.configs[0] != "c.yaml" || o.httpAddr != ":1" || o.streamWorkers != 0 || o.logFormat != "json" {
		t.Errorf("flags and environment mixed: %+v", o)
	}

	// A value that does not parse is one clear line naming the variable.
	var errb strings.Builder
	fs = newServeFlags(&serveOptions{}, &errb)
	_ = cli.ParseFlags(fs, nil)
	if code := applyEnv(fs, envLookup(map[string]string{"SLUICE_SHUTDOWN_TIMEOUT": "soon"})); code != 2 ||
		!strings.Contains(errb.String(), `SLUICE_SHUTDOWN_TIMEOUT="soon": want a duration`) {
		t.Errorf("bad value: exit %d %q", code, errb.String())
	}
}

// TestServeFromEnvironmentOnly: serve runs with no flags at all, its
// configuration and addresses taken from the environment.
func TestServeFromEnvironmentOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.yaml")
	writeFile(t, path, nativeConfig)
	t.Setenv("SLUICE_CONFIG", path)
	t.Setenv("SLUICE_HTTP_ADDR", "127.0.0.1:0")
	t.Setenv("SLUICE_GRPC_ADDR", "")
	t.Setenv("SLUICE_HEALTH_ADDR", "127.0.0.1:0")
	t.Setenv("SLUICE_LOG_FORMAT", "json")
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan int)
	go func() { done <- run(ctx, []string{"serve"}, io.Discard, &stderr) }()
	t.Cleanup(cancel)
	testwait.UntilSaw(t, "serve started", func() (bool, string) {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		default:
		}
		return strings.Contains(stderr.String(), `"msg":"sluice serving"`), stderr.String()
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	if logs := stderr.String(); !strings.Contains(logs, `"grpc":"off"`) || !strings.Contains(logs, `"http":"127.0.0.1:`) ||
		!strings.Contains(logs, `"health":"127.0.0.1:`) {
		t.Errorf("serve did not take its addresses from the environment:\n%s", logs)
	}
}

// TestRuntimeConfigDir: envoyproxy/ratelimit's RUNTIME_* variables name the
// directory RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY with its
// defaults; --config wins over them.
func TestRuntimeConfigDir(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, ""},
		{map[string]string{"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit"}, "/data/ratelimit/config"},
		{map[string]string{"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit", "RUNTIME_APPDIRECTORY": "limits"}, "/data/ratelimit/limits"},
		{map[string]string{"RUNTIME_SUBDIRECTORY": "ratelimit"}, "/srv/runtime_data/current/ratelimit/config"},
		{map[string]string{"RUNTIME_ROOT": "/data"}, "/data/config"},
	} {
		if got := runtimeConfigDir(envLookup(tc.env)); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.env, got, tc.want)
		}
	}
	env := envLookup(map[string]string{"RUNTIME_ROOT": "/data"})
	if got := configPaths([]string{"x.yaml"}, env); len(got) != 1 || got[0] != "x.yaml" {
		t.Errorf("--config did not win: %v", got)
	}
	if got := configPaths(nil, env); len(got) != 1 || got[0] != "/data/config" {
		t.Errorf("runtime directory: %v", got)
	}
}

// TestValidateRuntimeDirectory: with no files named, validate (like serve)
// reads envoyproxy/ratelimit's runtime directory from RUNTIME_ROOT and
// RUNTIME_SUBDIRECTORY.
func TestValidateRuntimeDirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "edge.yaml"), envoyConfig)
	writeFile(t, filepath.Join(dir, "api.yml"), nativeConfig)
	t.Setenv("RUNTIME_ROOT", root)
	t.Setenv("RUNTIME_SUBDIRECTORY", "ratelimit")
	if code, out, errOut := runCmd("validate"); code != 0 || out != "ok: 2 policies, 1 domain in 2 files\n" {
		t.Fatalf("validate: exit %d %q %q", code, out, errOut)
	}
	writeFile(t, filepath.Join(dir, "broken.yaml"), "domain: [\n")
	if code, _, errOut := runCmd("validate"); code != 1 || !strings.HasPrefix(errOut, filepath.Join(dir, "broken.yaml")+":") {
		t.Fatalf("validate of a broken file: exit %d %q", code, errOut)
	}
}

// TestValidateReadsServeEnvironment: in serve's environment, validate checks
// what serve would load: SLUICE_CONFIG when no file is named, and the store
// of SLUICE_STORE.
func TestValidateReadsServeEnvironment(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	writeFile(t, a, nativeConfig)
	writeFile(t, b, envoyConfig)
	t.Setenv("SLUICE_CONFIG", a+","+b)
	if code, out, errOut := runCmd("validate"); code != 0 || !strings.Contains(out, "in 2 files") {
		t.Fatalf("SLUICE_CONFIG: exit %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runCmd("validate", a); code != 0 || !strings.Contains(out, "in 1 file\n") {
		t.Fatalf("a named file wins over SLUICE_CONFIG: exit %d %q %q", code, out, errOut)
	}
	t.Setenv("SLUICE_STORE", "redis://127.0.0.1:1/notadb")
	code, _, errOut := runCmd("validate")
	if code != 1 || !strings.HasPrefix(errOut, "--store: ") || !strings.Contains(errOut, "invalid database number") {
		t.Fatalf("SLUICE_STORE: exit %d %q", code, errOut)
	}
}

// TestProxyFlagsFromEnvironment: every proxy flag can come from
// SLUICE_<FLAG>, as serve's do, and every flag is in the table of
// docs/gateways.md.
func TestProxyFlagsFromEnvironment(t *testing.T) {
	env := map[string]string{
		"SLUICE_CONFIG":                   "a.yaml,b.yaml",
		"SLUICE_UPSTREAM":                 "http://127.0.0.1:9000",
		"SLUICE_FORWARD_AUTH":             "true",
		"SLUICE_LISTEN":                   "127.0.0.1:9",
		"SLUICE_HEALTH_ADDR":              "",
		"SLUICE_STORE":                    "redis://127.0.0.1:6379",
		"SLUICE_LOG_FORMAT":               "json",
		"SLUICE_LOG_LEVEL":                "debug",
		"SLUICE_SHUTDOWN_TIMEOUT":         "3s",
		"SLUICE_DRAIN":                    "2s",
		"SLUICE_HTTP_MAX_CONNS":           "19",
		"SLUICE_HTTP_READ_HEADER_TIMEOUT": "20s",
		"SLUICE_HTTP_READ_TIMEOUT":        "21s",
		"SLUICE_HTTP_IDLE_TIMEOUT":        "22s",
		"SLUICE_HTTP_MAX_HEADER_BYTES":    "23",
		"SLUICE_HTTP_MAX_CONNS_PER_IP":    "24",
		"SLUICE_HTTP_MIN_BODY_RATE":       "25",
	}
	limits := defaultProxyLimits()
	limits.httpMaxConns, limits.httpReadHeader, limits.httpRead, limits.httpIdle, limits.httpMaxHeaderBytes =
		19, 20*time.Second, 21*time.Second, 22*time.Second, 23
	limits.httpMaxConnsPerIP, limits.httpMinBodyRate = 24, 25
	want := proxyOptions{configs: cli.StringList{"a.yaml", "b.yaml"}, upstream: "http://127.0.0.1:9000", fwdAuth: true,
		listen: "127.0.0.1:9", healthAddr: "", storeURL: "redis://127.0.0.1:6379", logFormat: "json", logLevel: "debug",
		shutdown: 3 * time.Second, drain: 2 * time.Second, limits: &limits}
	var o proxyOptions
	checkEnvFlags(t, newProxyFlags(&o, io.Discard), env, &o, &want, "gateways.md")
}

// checkEnvFlags applies env to fs, parsed without arguments, and compares
// the options fs fills, got, with want; and every flag of fs must have a
// case in env and a row in the environment table of docs/doc.
func checkEnvFlags(t *testing.T, fs *flag.FlagSet, env map[string]string, got, want any, doc string) {
	t.Helper()
	if code := cli.ParseFlags(fs, nil); code >= 0 {
		t.Fatalf("parse: %d", code)
	}
	if code := applyEnv(fs, envLookup(env)); code >= 0 {
		t.Fatalf("applyEnv: %d", code)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("from the environment:\n got %+v\nwant %+v", got, want)
	}
	text, err := os.ReadFile(filepath.Join("..", "..", "docs", doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range cli.FlagNames(fs) {
		if _, ok := env[envName(name)]; !ok {
			t.Errorf("--%s has no case in this test", name)
		}
		if row := "| `--" + name + "` | `" + envName(name) + "` |"; !strings.Contains(string(text), row) {
			t.Errorf("docs/%s lacks the row %s", doc, row)
		}
	}
}
