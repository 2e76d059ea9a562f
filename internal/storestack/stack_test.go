package storestack

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testlog"
)

// TestOpenStore: memory:// (or no URL) is the memory store, with no fail
// policy; a Redis URL is opened lazily — at once, though nothing listens —
// behind a failover.Store with the configured fail policy.
func TestOpenStore(t *testing.T) {
	for _, u := range []string{"", "memory://", "MEMORY://"} {
		st, err := Open(config.Store{URL: u, OnError: "closed"})
		if err != nil {
			t.Fatalf("%q: %v", u, err)
		}
		if st.Memory == nil || st.Store != st.Memory || st.Resetter != st.Memory || st.Failover != nil || st.Redis != nil {
			t.Errorf("%q: %+v, want the memory store, which resets keys", u, st)
		}
		st.Close()
	}
	for _, tc := range []struct {
		onError string
		want    failover.Mode
	}{{"", failover.FailLocal}, {"open", failover.FailOpen}, {"closed", failover.FailClosed}, {"local", failover.FailLocal}} {
		start := time.Now()
		// Port 1 on loopback: nothing listens there.
		st, err := Open(config.Store{URL: "redis://127.0.0.1:1", OnError: tc.onError, Timeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatalf("on_error %q: %v", tc.onError, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Open waited %v for an unreachable Redis", d)
		}
		fs := st.Failover
		if fs == nil || st.Store != fs || st.Resetter != fs || fs.Mode() != tc.want || st.Redis == nil {
			t.Fatalf("on_error %q: %+v, want a failover.Store failing %v over Redis", tc.onError, st, tc.want)
		}
		if (st.Local != nil) != (tc.want == failover.FailLocal) {
			t.Errorf("on_error %q: local store %v", tc.onError, st.Local)
		}
		st.Close()
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
			st, err := Open(tc.cfg)
			if err == nil {
				st.Close()
				t.Fatalf("opened %+v", st)
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
	err := Redact(errors.New("cannot dial redis://:p@ss@h: p@ss rejected"), "redis://:p%40ss@h")
	if strings.Contains(err.Error(), "p@ss") {
		t.Errorf("redact left the password: %v", err)
	}
	err = Redact(errors.New("shard 2: cannot dial redis://:sh4rd@b"), "redis://a:1?shard=redis://:sh4rd@b")
	if strings.Contains(err.Error(), "sh4rd") {
		t.Errorf("redact left a shard's password: %v", err)
	}
}

// TestOpenStoreLease: with store.lease, decisions come from leased quota —
// far fewer script calls reach Redis than requests are decided — and
// closing the store gives the unused quota back.
func TestOpenStoreLease(t *testing.T) {
	srv := redistest.Start(t)
	stack, err := Open(config.Store{URL: srv.URL(), Lease: &config.Lease{}})
	if err != nil {
		t.Fatal(err)
	}
	st := stack.Store
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1000, Period: 60_000_000_000} // per minute
	l, err := sluice.New(st, p)
	if err != nil {
		t.Fatal(err)
	}
	const requests = 200
	for i := range requests {
		res, err := l.Allow(context.Background(), "k")
		if err != nil || !res.Allowed {
			t.Fatalf("request %d: %+v %v", i, res, err)
		}
	}
	calls := evalCalls(t, srv)
	t.Logf("%d script calls for %d requests", calls, requests)
	if calls > requests/2 {
		t.Errorf("%d script calls for %d requests: leases are not used", calls, requests)
	}
	stack.Close()
	// What is left in Redis is the capacity less what was admitted (a bit
	// more, as the minute goes on): nothing stays leased after close.
	direct, err := Open(config.Store{URL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	peek, err := direct.Store.Decide(context.Background(), sluice.Request{Policy: &p, Key: "k"})
	if err != nil || peek.Remaining < p.Limit-requests {
		t.Errorf("after close Redis has %d left (%v), want at least %d", peek.Remaining, err, p.Limit-requests)
	}
}

// evalCalls counts the FCALL, EVALSHA and EVAL calls Redis has served.
func evalCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	info, err := srv.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range regexp.MustCompile(`cmdstat_(?:evalsha|eval|fcall):calls=(\d+)`).FindAllStringSubmatch(info, -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	if n == 0 {
		t.Fatalf("no script calls in INFO commandstats:\n%s", info)
	}
	return n
}

// syncLog is a slog sink goroutines and the test share.
type syncLog = testlog.Buffer

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
