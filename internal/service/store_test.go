package service

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memory"
)

// TestOpenStore: memory:// (or no URL) is the memory store, with no fail
// policy; a Redis URL is opened lazily — at once, though nothing listens —
// behind a failover.Store with the configured fail policy.
func TestOpenStore(t *testing.T) {
	for _, u := range []string{"", "memory://", "MEMORY://"} {
		st, closeStore, err := OpenStore(config.Store{URL: u, OnError: "closed"}, nil)
		if err != nil {
			t.Fatalf("%q: %v", u, err)
		}
		if _, ok := st.(*memory.Store); !ok {
			t.Errorf("%q: %T, want *memory.Store", u, st)
		}
		closeStore()
	}
	for _, tc := range []struct {
		onError string
		want    failover.Mode
	}{{"", failover.FailLocal}, {"open", failover.FailOpen}, {"closed", failover.FailClosed}, {"local", failover.FailLocal}} {
		start := time.Now()
		// Port 1 on loopback: nothing listens there.
		st, closeStore, err := OpenStore(config.Store{URL: "redis://127.0.0.1:1", OnError: tc.onError, Timeout: 50 * time.Millisecond}, nil)
		if err != nil {
			t.Fatalf("on_error %q: %v", tc.onError, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("OpenStore waited %v for an unreachable Redis", d)
		}
		fs, ok := st.(*failover.Store)
		if !ok || fs.Mode() != tc.want {
			t.Fatalf("on_error %q: %T (ok %v), want a failover.Store failing %v", tc.onError, st, ok, tc.want)
		}
		closeStore()
	}
}

// TestOpenStoreErrors: a store that cannot be opened is an error naming
// the setting at fault, and never quoting the password of the URL.
func TestOpenStoreErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	write(t, notPEM, "hello\n")
	const pass = "hunter2-s3cret"
	for _, tc := range []struct {
		name string
		cfg  config.Store
		want string
	}{
		{"unknown scheme", config.Store{URL: "http://user:" + pass + "@h:80"}, `unknown scheme "http"`},
		{"rueidis rejects the URL", config.Store{URL: "redis://:" + pass + "@127.0.0.1:6379/a/b"}, "invalid URL path"},
		{"bad database", config.Store{URL: "redis://:" + pass + "@127.0.0.1:6379/zero"}, "invalid database number"},
		{"on_error", config.Store{URL: "redis://127.0.0.1:6379", OnError: "sometimes"}, "sometimes"},
		{"missing password_file", config.Store{URL: "redis://127.0.0.1:6379", PasswordFile: filepath.Join(dir, "nope")}, "store.password_file"},
		{"missing ca_file", config.Store{URL: "rediss://127.0.0.1:6379", TLS: &config.TLS{CAFile: filepath.Join(dir, "nope")}}, "store.tls.ca_file"},
		{"ca_file without PEM", config.Store{URL: "rediss://127.0.0.1:6379", TLS: &config.TLS{CAFile: notPEM}}, "no PEM certificate"},
		{"shard given twice", config.Store{URL: "redis://:" + pass + "@127.0.0.1:6379?shard=redis://:" + pass + "@127.0.0.1:6379"}, "given twice"},
		{"bad shard URL", config.Store{URL: "redis://127.0.0.1:6379?shard=redis://:" + pass + "@127.0.0.1:6379/a/b"}, "shard 2"},
		{"bad client pair", config.Store{URL: "rediss://127.0.0.1:6379", TLS: &config.TLS{CertFile: notPEM, KeyFile: notPEM}}, "store.tls.cert_file: cannot load it with key_file"},
		{"per second without Redis", config.Store{URL: "memory://", PerSecondURL: "redis://127.0.0.1:6380"}, "store.per_second_url: a second Redis"},
		{"per second scheme", config.Store{URL: "redis://127.0.0.1:6379", PerSecondURL: "memory://"}, `store.per_second_url: unknown scheme "memory"`},
		{"per second URL", config.Store{URL: "redis://127.0.0.1:6379", PerSecondURL: "redis://:" + pass + "@127.0.0.1:6380/a/b"}, "store.per_second_url: redis: invalid URL path"},
		{"per second without TLS", config.Store{URL: "rediss://127.0.0.1:6379", PerSecondURL: "redis://127.0.0.1:6380", TLS: &config.TLS{}}, "must be rediss:// too"},
		{"per second on the same server", config.Store{URL: "redis://127.0.0.1:6379", PerSecondURL: "redis://:" + pass + "@127.0.0.1:6379"}, "both 127.0.0.1:6379"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, closeStore, err := OpenStore(tc.cfg, nil)
			if err == nil {
				closeStore()
				t.Fatalf("opened %T", st)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), pass) {
				t.Errorf("error quotes the password: %q", err)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://127.0.0.1:6379":                                   "redis://127.0.0.1:6379",
		"redis://:pw@127.0.0.1:6379/2":                             "redis://:xxxxx@127.0.0.1:6379/2",
		"rediss://app:pw@h:6380?addr=h2:1":                         "rediss://app:xxxxx@h:6380?addr=h2:1",
		"redis://user@h:6379":                                      "redis://user@h:6379",
		"redis://:p%40ss%3Aw0rd@h:6379":                            "redis://:xxxxx@h:6379",
		"redis://:pw@h:port":                                       "(unparsable URL)",
		"memory://":                                                "memory://",
		"unix://:pw@/var/run/redis.sock":                           "unix://:xxxxx@/var/run/redis.sock",
		"redis://:with%20space@h:6379/0":                           "redis://:xxxxx@h:6379/0",
		"redis://:pw@[::1]:6379":                                   "redis://:xxxxx@[::1]:6379",
		"redis://%3Aodd:pw@127.0.0.1:6379/":                        "redis://%3Aodd:xxxxx@127.0.0.1:6379/",
		"redis://:pw@a:1?shard=redis://:pw2@b:2&shard=redis://c:3": "redis://:xxxxx@a:1?shard=redis%3A%2F%2F%3Axxxxx%40b%3A2&shard=redis%3A%2F%2Fc%3A3",
	} {
		if got := RedactURL(raw); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
	}
	// redact, for library errors that quote the URL: the decoded password
	// goes, whatever else the message says.
	err := redact(errors.New("cannot dial redis://:p@ss@h: p@ss rejected"), "redis://:p%40ss@h")
	if strings.Contains(err.Error(), "p@ss") {
		t.Errorf("redact left the password: %v", err)
	}
	err = redact(errors.New("shard 2: cannot dial redis://:sh4rd@b"), "redis://a:1?shard=redis://:sh4rd@b")
	if strings.Contains(err.Error(), "sh4rd") {
		t.Errorf("redact left a shard's password: %v", err)
	}
}

// syncLog is a slog sink the Watch goroutine and the test share.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestReloadStoreChange: a reload warns that a changed store section needs
// a restart (quoting the URLs without their passwords), and does not warn
// when the section is as it was — a tls section included, which is a
// pointer in config.Store.
func TestReloadStoreChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	storeSection := func(url, ca string) string {
		return "store:\n  url: " + url + "\n  tls:\n    ca_file: " + ca + "\n" + policyFile(3)
	}
	write(t, path, storeSection("rediss://:old-pw@h:6379", "ca.pem"))
	load := func() (*config.Config, error) { return config.Load(path) }
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncLog{}
	s := New(memory.New(), cfg, WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	const warning = "the store section changed"

	if err := s.Reload(load); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), warning) {
		t.Errorf("a reload of the same file warns that the store changed:\n%s", logs)
	}

	write(t, path, storeSection("rediss://:new-pw@h:6379", "ca.pem"))
	if err := s.Reload(load); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, warning) || !strings.Contains(out, "xxxxx") {
		t.Errorf("a new store URL is not warned about:\n%s", out)
	}
	if strings.Contains(out, "old-pw") || strings.Contains(out, "new-pw") {
		t.Errorf("the warning quotes a password:\n%s", out)
	}

	before := strings.Count(logs.String(), warning)
	write(t, path, storeSection("rediss://:new-pw@h:6379", "other-ca.pem"))
	if err := s.Reload(load); err != nil {
		t.Fatal(err)
	}
	if strings.Count(logs.String(), warning) != before+1 {
		t.Errorf("a new tls.ca_file is not warned about:\n%s", logs)
	}
}

// TestDecideFailClosed: a Service on a store failing closed denies with an
// error wrapping ErrStore and failover.ErrUnavailable, fills the results as
// denied and Degraded, and counts the decision in
// sluice_store_degraded_decisions_total{on_error="closed"}; Ready reports the
// breaker and the fail policy.
func TestDecideFailClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	write(t, path, policyFile(3))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	down := errors.New("redis is down")
	fs := failover.New(failingStore{down}, failover.WithMode(failover.FailClosed), failover.WithBreaker(failover.BreakerSettings{MinCalls: 1, Cooldown: time.Hour}))
	logs := &syncLog{}
	s := New(fs, cfg, WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	p := s.Config().Policy("p")
	for i := range 2 { // the first reaches the store, the second meets the open breaker
		res := []sluice.Result{{Allowed: true}}
		allowed, err := s.Decide(context.Background(), []Check{{Policy: p, Key: "k", Cost: 1}}, res)
		if allowed || !errors.Is(err, ErrStore) || !errors.Is(err, failover.ErrUnavailable) {
			t.Fatalf("decision %d: %v, %v", i, allowed, err)
		}
		if r := res[0]; r.Allowed || !r.Degraded || r.Limit != 3 {
			t.Fatalf("decision %d: result %+v", i, r)
		}
	}
	if got := testutil.ToFloat64(s.metrics.degraded.WithLabelValues("closed")); got != 2 {
		t.Errorf(`sluice_store_degraded_decisions_total{on_error="closed"} = %v, want 2`, got)
	}
	if got := testutil.ToFloat64(s.metrics.decisions.WithLabelValues("p", DecisionDenied)); got != 2 {
		t.Errorf("denied decisions = %v, want 2", got)
	}
	// One call reached the store and failed: one error, with its cause, and
	// one log line saying it.
	if got := testutil.ToFloat64(s.metrics.storeErrors.WithLabelValues(CauseError)); got != 1 {
		t.Errorf(`sluice_store_errors_total{cause="error"} = %v, want 1`, got)
	}
	if out := logs.String(); strings.Count(out, "store call failed") != 1 || !strings.Contains(out, "redis is down") || !strings.Contains(out, "cause=error") {
		t.Errorf("the store failure is not logged once with its cause:\n%s", out)
	}
	st := s.Ready(context.Background())
	if st.Ready || st.Breaker != "open" || st.OnError != "closed" || !strings.Contains(st.Error, "redis is down") {
		t.Fatalf("Ready = %+v", st)
	}
}

// TestStoreErrorLogRateLimited: failed store calls are logged at most once a
// second, each line saying how many were left out, in every fail mode.
func TestStoreErrorLogRateLimited(t *testing.T) {
	for _, mode := range []failover.Mode{failover.FailOpen, failover.FailClosed, failover.FailLocal} {
		t.Run(mode.String(), func(t *testing.T) {
			logs := &syncLog{}
			log := slog.New(slog.NewTextHandler(logs, nil))
			var l errorLog
			start := time.Unix(1_700_000_000, 0)
			down := errors.New("OOM command not allowed when used memory > 'maxmemory'")
			for i := range 250 { // 2.5 s of failures, one every 10 ms
				l.log(log, start.Add(time.Duration(i)*10*time.Millisecond), down, storeCause(down), mode.String())
			}
			out := logs.String()
			if n := strings.Count(out, "store call failed"); n != 3 {
				t.Fatalf("%d log lines for 2.5 s of failures, want 3:\n%s", n, out)
			}
			if !strings.Contains(out, "suppressed=99") || !strings.Contains(out, "on_error="+mode.String()) || !strings.Contains(out, "OOM command") {
				t.Fatalf("log lines lack the count left out, the mode or the cause:\n%s", out)
			}
		})
	}
}

// failingStore fails every call.
type failingStore struct{ err error }

func (f failingStore) Decide(context.Context, sluice.Request) (sluice.Result, error) {
	return sluice.Result{}, f.err
}

func (f failingStore) DecideAll(context.Context, []sluice.Request, []sluice.Result) error {
	return f.err
}
