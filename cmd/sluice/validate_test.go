package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
)

// TestValidateRefusesWhatServeRefuses: for each configuration serve cannot
// start with, validate fails too, with the same lines, and each line
// carries file:line: field.
func TestValidateRefusesWhatServeRefuses(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "not-pem.crt"), "not a certificate\n")
	writeFile(t, filepath.Join(dir, "pw"), "secret\n")
	const policies = "policies:\n  - {name: p, algorithm: gcra, limit: 5, period: 1m}\n"
	for _, tc := range []struct {
		name, store string
		line        int
		field       string
		message     string
		storeFlag   string
	}{
		{name: "password_file missing", store: "  url: redis://127.0.0.1:1\n  password_file: missing.pass\n",
			line: 3, field: "store.password_file", message: "no such file"},
		{name: "tls on redis://", store: "  url: redis://127.0.0.1:1\n  tls:\n    server_name: x\n",
			line: 4, field: "store.tls", message: "not rediss://"},
		{name: "ca_file missing", store: "  url: rediss://127.0.0.1:1\n  tls:\n    ca_file: missing-ca.pem\n",
			line: 4, field: "store.tls.ca_file", message: "no such file"},
		{name: "ca_file not PEM", store: "  url: rediss://127.0.0.1:1\n  tls:\n    ca_file: not-pem.crt\n",
			line: 4, field: "store.tls.ca_file", message: "holds no PEM certificate"},
		{name: "client certificate unreadable", store: "  url: rediss://127.0.0.1:1\n  tls:\n    cert_file: not-pem.crt\n    key_file: not-pem.crt\n",
			line: 4, field: "store.tls.cert_file", message: "key_file"},
		{name: "bad database in the URL", store: "  url: redis://127.0.0.1:1/abc\n",
			line: 2, field: "store.url", message: "invalid database number"},
		{name: "bad dial timeout in the URL", store: "  url: redis://127.0.0.1:1?dial_timeout=soon\n  password_file: pw\n",
			line: 2, field: "store.url", message: "invalid dial timeout"},
		{name: "bad --store URL", store: "  url: memory://\n", storeFlag: "redis://127.0.0.1:1/abc",
			message: "--store: redis: invalid database number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.NewReplacer(" ", "_", ":", "", "/", "").Replace(tc.name)+".yaml")
			writeFile(t, path, "store:\n"+tc.store+policies)
			var flags []string
			if tc.storeFlag != "" {
				flags = []string{"--store", tc.storeFlag}
			}
			code, _, valOut := runCmd(append(append([]string{"validate"}, flags...), path)...)
			if code != 1 {
				t.Fatalf("validate: exit %d, want 1: %q", code, valOut)
			}
			code, _, serveOut := runCmd(append([]string{"serve", "--config", path, "--http-addr", "127.0.0.1:0", "--grpc-addr", ""}, flags...)...)
			if code != 1 {
				t.Fatalf("serve: exit %d, want 1: %q", code, serveOut)
			}
			want := tc.message
			if tc.field != "" {
				want = fmt.Sprintf("%s:%d:", path, tc.line)
				if !strings.HasPrefix(valOut, want) || !strings.Contains(valOut, tc.field+": ") || !strings.Contains(valOut, tc.message) {
					t.Errorf("validate said %q; want %s… %s: …%s…", valOut, want, tc.field, tc.message)
				}
			} else if !strings.HasPrefix(valOut, want) {
				t.Errorf("validate said %q; want it to start with %q", valOut, want)
			}
			if !strings.Contains(serveOut, strings.TrimSpace(valOut)) {
				t.Errorf("serve and validate differ:\nvalidate: %q\nserve:    %q", valOut, serveOut)
			}
		})
	}
	// The same store section with every file in place passes both.
	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, "store:\n  url: redis://127.0.0.1:1\n  password_file: pw\n"+policies)
	if code, out, errOut := runCmd("validate", good); code != 0 {
		t.Fatalf("valid store section: exit %d %q %q", code, out, errOut)
	}
}

// TestStoreLeaseURLFromFlag: store.lease in a file whose store URL comes only
// from --store is what --store makes it: leases on Redis, valid for validate
// and serve; without --store the store is memory and the lease is refused at
// its line.
func TestStoreLeaseURLFromFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, "store:\n  on_error: closed\n  lease: {ttl: 50ms}\npolicies:\n  - {name: p, algorithm: gcra, limit: 5, period: 1m}\n")
	code, _, errOut := runCmd("validate", path)
	if code != 1 || !strings.Contains(errOut, path+":3:") || !strings.Contains(errOut, "store.lease: leases share a Redis store") {
		t.Errorf("memory store with a lease: exit %d %q; want the lease refused at line 3", code, errOut)
	}
	redisURL := "redis://127.0.0.1:1" // nothing listens: serve connects lazily
	if code, out, errOut := runCmd("validate", "--store", redisURL, path); code != 0 {
		t.Errorf("validate --store %s: exit %d %q %q", redisURL, code, out, errOut)
	}
	log, _ := newLogger(&syncBuffer{}, "text", "warn")
	ctx, cancel := context.WithCancel(t.Context())
	srv, err := startServer(ctx, serveOptions{configs: cli.StringList{path}, storeURL: redisURL,
		httpAddr: "127.0.0.1:0", grpcAddr: "", shutdown: 5 * time.Second}, log)
	if err != nil {
		cancel()
		t.Fatalf("serve --store %s with store.lease in the file: %v", redisURL, err)
	}
	cancel()
	srv.wait()
}

// TestValidateReadsRatelimitStoreVariables: validate derives the store as serve
// does, envoyproxy/ratelimit's variables included, so that run in serve's
// environment it refuses what serve refuses, with the same words.
func TestValidateReadsRatelimitStoreVariables(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policies.yaml")
	writeFile(t, path, "policies:\n  - {name: p, algorithm: gcra, limit: 5, period: 1m}\n")
	redis := map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "127.0.0.1:1"}
	with := func(a, b map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range []map[string]string{a, b} {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		code    int
		message string
	}{
		{"REDIS_TLS_CACERT missing", with(redis, map[string]string{"REDIS_TLS": "true", "REDIS_TLS_CACERT": filepath.Join(dir, "missing-ca.pem")}),
			1, "store.tls.ca_file"},
		{"REDIS_PERSECOND without a Redis store", map[string]string{"REDIS_PERSECOND": "true", "REDIS_PERSECOND_SOCKET_TYPE": "tcp", "REDIS_PERSECOND_URL": "127.0.0.1:2"},
			1, "--store-per-second: a second Redis for the per-second limits needs a Redis store"},
		{"SLUICE_STORE_PER_SECOND bad", with(redis, map[string]string{"SLUICE_STORE_PER_SECOND": "redis://127.0.0.1:2/abc"}),
			1, "--store-per-second: redis: invalid database number"},
		{"CACHE_KEY_PREFIX with a brace", map[string]string{"CACHE_KEY_PREFIX": "{rl}:"}, 2, "--store-key-prefix"},
		{"BACKEND_TYPE=memcache", map[string]string{"BACKEND_TYPE": "memcache"}, 2, "BACKEND_TYPE=memcache: Sluice has no memcache store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, _, valOut := runCmd("validate", path)
			if code != tc.code || !strings.Contains(valOut, tc.message) {
				t.Fatalf("validate: exit %d %q, want %d and %q", code, valOut, tc.code, tc.message)
			}
			code, _, serveOut := runCmd("serve", "--config", path, "--http-addr", "127.0.0.1:0", "--grpc-addr", "", "--health-addr", "")
			if code != tc.code {
				t.Fatalf("serve: exit %d %q, want %d", code, serveOut, tc.code)
			}
			if first, _, _ := strings.Cut(valOut, "\n"); !strings.Contains(serveOut, strings.ReplaceAll(first, "validate", "serve")) {
				t.Errorf("serve and validate differ:\nvalidate: %q\nserve:    %q", valOut, serveOut)
			}
		})
	}
	// Without the variables, the same file is valid.
	if code, out, errOut := runCmd("validate", path); code != 0 {
		t.Fatalf("exit %d %q %q", code, out, errOut)
	}
}
