package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestStoreFields: every field of the store section parses, and the file
// names in it (password_file, tls.*_file) are resolved against the directory
// of the file that sets them — not the working directory, and not the first
// file's — while absolute names are kept as written.
func TestStoreFields(t *testing.T) {
	root := t.TempDir()
	confDir, storeDir := filepath.Join(root, "conf"), filepath.Join(root, "conf", "store")
	for _, d := range []string{confDir, storeDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	absCA := filepath.Join(root, "pki", "ca.pem")
	policies := filepath.Join(confDir, "policies.yaml")
	store := filepath.Join(storeDir, "store.yaml")
	for path, src := range map[string]string{
		policies: y("policies:", "  - {name: p, algorithm: gcra, limit: 10, period: 1s}"),
		store: y(
			"store:",
			"  url: rediss://redis.internal:6380/1",
			"  per_second_url: rediss://redis-ps.internal:6380",
			"  timeout: 75ms",
			"  timeout_min: 20ms",
			"  timeout_max: 2s",
			"  on_error: local",
			"  nodes: 3",
			"  breaker:",
			"    min_calls: 7",
			"    window: 30s",
			"    failure_rate: 40",
			"    cooldown: 1500ms",
			"    probes: 2",
			"  max_keys: 5000",
			"  max_bytes: 67108864",
			"  password_file: secrets/redis-password",
			"  key_prefix: \"team-a:\"",
			"  tls:",
			"    ca_file: "+absCA,
			"    cert_file: ../certs/client.crt",
			"    key_file: client.key",
			"    server_name: redis.internal",
			"    insecure_skip_verify: true",
		),
	} {
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := Load(policies, store)
	if err != nil {
		t.Fatal(err)
	}
	want := Store{
		URL:          "rediss://redis.internal:6380/1",
		PerSecondURL: "rediss://redis-ps.internal:6380",
		Timeout:      75 * time.Millisecond,
		TimeoutMin:   20 * time.Millisecond,
		TimeoutMax:   2 * time.Second,
		OnError:      OnErrorLocal,
		Nodes:        3,
		Breaker:      Breaker{MinCalls: 7, Window: 30 * time.Second, FailureRate: 40, Cooldown: 1500 * time.Millisecond, Probes: 2},
		MaxKeys:      5000,
		MaxBytes:     64 << 20,
		PasswordFile: filepath.Join(storeDir, "secrets", "redis-password"),
		KeyPrefix:    "team-a:",
		TLS: &TLS{
			CAFile:             absCA,
			CertFile:           filepath.Join(confDir, "certs", "client.crt"),
			KeyFile:            filepath.Join(storeDir, "client.key"),
			ServerName:         "redis.internal",
			InsecureSkipVerify: true,
		},
	}
	if !reflect.DeepEqual(cfg.Store, want) {
		t.Errorf("Store =\n  %+v (TLS %+v)\nwant\n  %+v (TLS %+v)", cfg.Store, cfg.Store.TLS, want, want.TLS)
	}
}

// TestStoreDefaults: a minimal store section leaves every new field at its
// zero value (the defaults are applied by whoever opens the store), an empty
// tls section still means "use TLS settings" (non-nil), and a null one does
// not. Each on_error value is accepted.
func TestStoreDefaults(t *testing.T) {
	cfg, err := Parse("t.yaml", []byte(y("store:", "  url: redis://127.0.0.1:6379")))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Store{URL: "redis://127.0.0.1:6379"}); !reflect.DeepEqual(cfg.Store, want) {
		t.Errorf("Store = %+v, want %+v", cfg.Store, want)
	}
	cfg, err = Parse("t.yaml", []byte(y("store:", "  url: rediss://h:6379", "  tls: {}", "  breaker: {}")))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store.TLS == nil || *cfg.Store.TLS != (TLS{}) || cfg.Store.Breaker != (Breaker{}) {
		t.Errorf("empty tls and breaker: %+v, TLS %+v", cfg.Store, cfg.Store.TLS)
	}
	cfg, err = Parse("t.yaml", []byte(y("store:", "  url: rediss://h:6379", "  tls:")))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store.TLS != nil {
		t.Errorf("tls: (null) gave TLS %+v, want nil", cfg.Store.TLS)
	}
	for _, mode := range []string{OnErrorOpen, OnErrorClosed, OnErrorLocal} {
		cfg, err := Parse("t.yaml", []byte(y("store:", "  url: redis://h:6379", "  on_error: "+mode)))
		if err != nil || cfg.Store.OnError != mode {
			t.Errorf("on_error %s: %+v, %v", mode, cfg, err)
		}
	}
	// Relative names in a file given by a relative path stay relative to
	// that file's directory.
	cfg, err = Parse(filepath.Join("deploy", "sluice.yaml"), []byte(y("store:", "  password_file: pw", "  tls: {ca_file: ca.pem}")))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store.PasswordFile != filepath.Join("deploy", "pw") || cfg.Store.TLS.CAFile != filepath.Join("deploy", "ca.pem") {
		t.Errorf("relative file in deploy/sluice.yaml: %+v, TLS %+v", cfg.Store, cfg.Store.TLS)
	}
}

// TestStoreProblems: invalid values of the store section are problems at the
// offending line and column, naming the field's full path.
func TestStoreProblems(t *testing.T) {
	const store = "store:"
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"on_error", y(store, "  url: redis://h:6379", "  on_error: sometimes"),
			[]string{`3:13 store.on_error: must be open, closed or local, got "sometimes"`}},
		{"on_error is case-sensitive", y(store, "  on_error: Closed"),
			[]string{`2:13 store.on_error: must be open, closed or local, got "Closed"`}},
		{"on_error not a string", y(store, "  on_error: [open]"),
			[]string{"2:13 store.on_error: must be a string, got a list"}},
		{"nodes 0", y(store, "  url: redis://h:6379", "  nodes: 0"),
			[]string{"3:10 store.nodes: must be between 1 and 1048576, got 0"}},
		{"nodes not a number", y(store, "  nodes: two"),
			[]string{`2:10 store.nodes: must be a whole number, got the string "two"`}},
		{"max_keys negative", y(store, "  max_keys: -5"),
			[]string{"2:13 store.max_keys: must be between 1 and 1099511627776, got -5"}},
		{"breaker.min_calls -1", y(store, "  breaker:", "    min_calls: -1"),
			[]string{"3:16 store.breaker.min_calls: must be between 1 and 1048576, got -1"}},
		{"breaker.failure_rate 150", y(store, "  breaker:", "    failure_rate: 150"),
			[]string{"3:19 store.breaker.failure_rate: must be between 1 and 100, got 150"}},
		{"timeout_min over timeout_max", y(store, "  timeout_min: 2s", "  timeout_max: 1s"),
			[]string{"2:16 store.timeout_min: must not exceed timeout_max (1s), got 2s"}},
		{"max_bytes under a MiB", y(store, "  max_bytes: 4096"),
			[]string{"2:14 store.max_bytes: must be at least 1048576 (1 MiB), got 4096"}},
		{"max_bytes zero", y(store, "  max_bytes: 0"),
			[]string{"2:14 store.max_bytes: must be between 1 and 1125899906842624, got 0"}},
		{"breaker.cooldown -1s", y(store, "  breaker:", "    cooldown: -1s"),
			[]string{"3:15 store.breaker.cooldown: must not be negative, got -1s"}},
		{"breaker.cooldown without unit", y(store, "  breaker: {cooldown: 5}"),
			[]string{`2:23 store.breaker.cooldown: must be a Go duration such as "1m", "1h30m" or "250ms", got the integer 5`}},
		{"breaker not a mapping", y(store, "  breaker: 5"),
			[]string{"2:12 store.breaker: must be a mapping, got the integer 5"}},
		{"unknown key under breaker", y(store, "  breaker:", "    probes: 3", "    probe: 3", "    reset: 1s"), []string{
			"4:5 store.breaker.probe: unknown field (did you mean probes?); allowed here: min_calls, window, failure_rate, cooldown, probes",
			"5:5 store.breaker.reset: unknown field; allowed here: min_calls, window, failure_rate, cooldown, probes"}},
		{"tls cert_file without key_file", y(store, "  url: rediss://h:6379", "  tls:", "    ca_file: ca.pem", "    cert_file: client.crt"),
			[]string{"4:5 store.tls: cert_file and key_file go together: set both or neither"}},
		{"tls key_file without cert_file", y(store, "  tls: {key_file: client.key}"),
			[]string{"2:8 store.tls: cert_file and key_file go together: set both or neither"}},
		{"unknown key under tls", y(store, "  tls:", "    ca_file: ca.pem", "    ca_flie: ca.pem", "    verify: false"), []string{
			"4:5 store.tls.ca_flie: unknown field (did you mean ca_file?); allowed here: ca_file, cert_file, key_file, server_name, insecure_skip_verify",
			"5:5 store.tls.verify: unknown field; allowed here: ca_file, cert_file, key_file, server_name, insecure_skip_verify"}},
		{"tls insecure_skip_verify not a boolean", y(store, "  tls:", "    insecure_skip_verify: maybe"),
			[]string{`3:27 store.tls.insecure_skip_verify: must be true or false, got the string "maybe"`}},
		{"per_second_url without a scheme", y(store, "  per_second_url: redis-ps:6379"),
			[]string{"2:19 store.per_second_url: want a memory://, redis://, rediss:// or unix:// URL (a Redis address is written redis://host:6379), got scheme redis-ps"}},
		{"key_prefix with a brace", y(store, "  key_prefix: '{rl}:'"),
			[]string{`2:15 store.key_prefix: "{rl}:" holds '{' or '}': Sluice places the Redis Cluster hash tags in its keys itself`}},
		{"tls not a mapping", y(store, "  tls: true"),
			[]string{"2:8 store.tls: must be a mapping, got the boolean true"}},
		{"password_file not a string", y(store, "  password_file: {file: x}"),
			[]string{"2:18 store.password_file: must be a string, got a mapping"}},
		{"timeout negative", y(store, "  timeout: -50ms"),
			[]string{"2:12 store.timeout: must not be negative, got -50ms"}},
		{"unknown store key", y(store, "  on_eror: open"),
			[]string{"2:3 store.on_eror: unknown field (did you mean on_error?); allowed here: url, timeout, timeout_min, timeout_max, on_error, nodes, breaker, max_keys, max_bytes, password_file, tls, lease"}},
		{"every problem at once", y(store,
			"  on_error: sometimes",
			"  nodes: 0",
			"  breaker: {min_calls: -1, cooldown: -1s}",
			"  tls: {cert_file: c.pem, colour: red}"), []string{
			`2:13 store.on_error: must be open, closed or local, got "sometimes"`,
			"3:10 store.nodes: must be between 1 and 1048576, got 0",
			"4:24 store.breaker.min_calls: must be between 1 and 1048576, got -1",
			"4:38 store.breaker.cooldown: must not be negative, got -1s",
			"5:8 store.tls: cert_file and key_file go together",
			"5:27 store.tls.colour: unknown field; allowed here: ca_file,"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkProblems(t, parseProblems(t, tc.src), tc.want)
		})
	}
}

// TestStoreProblemsFromLoad: through Load, a store problem prints as
// file:line:col: field: message, and the message never quotes the store
// URL (which may hold a password).
func TestStoreProblemsFromLoad(t *testing.T) {
	paths := write(t, map[string]string{"store.yaml": y(
		"store:",
		"  url: redis://:hunter2@127.0.0.1:6379",
		"  on_error: sometimes",
		"  nodes: 0",
		"  breaker:",
		"    min_calls: -1",
		"    cooldown: -1s",
		"  tls:",
		"    cert_file: client.crt",
		"    insecure: true",
	)}, "store.yaml")
	_, err := Load(paths...)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Load: %v, want an *Error", err)
	}
	want := []string{
		paths[0] + `:3:13: store.on_error: must be open, closed or local, got "sometimes"`,
		paths[0] + ":4:10: store.nodes: must be between 1 and 1048576, got 0",
		paths[0] + ":6:16: store.breaker.min_calls: must be between 1 and 1048576, got -1",
		paths[0] + ":7:15: store.breaker.cooldown: must not be negative, got -1s",
		paths[0] + ":9:5: store.tls: cert_file and key_file go together: set both or neither",
		paths[0] + ":10:5: store.tls.insecure: unknown field",
	}
	got := strings.Split(err.Error(), "\n")
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.HasPrefix(got[i], want[i])
	}
	if !ok {
		t.Errorf("Load error:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error quotes the password:\n%s", err)
	}
}
