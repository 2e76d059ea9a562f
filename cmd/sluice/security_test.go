package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
)

// secret returns a fresh random string that cannot occur anywhere by chance.
func secret(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// withPassword returns a redis:// URL for addr holding pass.
func withPassword(addr, pass string) string {
	return (&url.URL{Scheme: "redis", Host: addr, User: url.UserPassword("", pass)}).String()
}

// expectReady waits until /readyz/store is 200 and a check of key
// "probe-"+t.Name() is decided on Redis (not degraded).
func (s *served) expectReady(t *testing.T) {
	t.Helper()
	testwait.UntilSaw(t, "ready", func() (bool, string) {
		code, rd, body := s.storeReady(t)
		return code == 200 && rd.Store.Ready, fmt.Sprintf("%d %s", code, body)
	})
	testwait.UntilSaw(t, "deciding on Redis", func() (bool, string) {
		resp, c, body := s.check(t, "probe-"+t.Name())
		return resp.StatusCode == 200 && len(c.Checks) == 1 && !c.Checks[0].Degraded, body
	})
}

// expectUnready checks that /readyz/store stays 503, and /readyz 200 (the
// fail policy answers), until the store's error contains one of want
// (case-insensitive), and returns that error: the first probes may fail for
// another reason, such as still dialing.
func (s *served) expectUnready(t *testing.T, want ...string) string {
	t.Helper()
	var last string
	testwait.UntilSaw(t, "unready because of "+strings.Join(want, " or "), func() (bool, string) {
		code, rd, body := s.storeReady(t)
		if code != 503 || rd.Store.Ready {
			t.Fatalf("/readyz/store: %d %s, want 503", code, body)
		}
		if code, rd, body := s.ready(t); code != 200 || rd.Store.Ready {
			t.Fatalf("/readyz: %d %s, want 200 with the store not ready", code, body)
		}
		last = rd.Store.Error
		for _, w := range want {
			if strings.Contains(strings.ToLower(last), strings.ToLower(w)) {
				return true, body
			}
		}
		return false, body
	})
	return last
}

// keyInRedis checks that a decision made through s reached r.
func keyInRedis(t *testing.T, r *redistest.Server, key string) {
	t.Helper()
	keys, err := r.Do("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(keys, "{api:"+key+"}") {
		t.Fatalf("no key for %s in Redis: %q", key, keys)
	}
}

// TestServeRedisPassword: the Redis password can be given in store.url or,
// with a URL without one, in store.password_file (relative to the config
// file; it replaces a password in the URL). A wrong or missing password
// leaves the service up but unready, with an error that quotes no password.
func TestServeRedisPassword(t *testing.T) {
	pass := secret(t, "pw-")
	wrong := secret(t, "wrong-")
	r := redistest.Start(t, redistest.WithPassword(pass))
	plain := "redis://" + r.Addr()

	t.Run("in the URL", func(t *testing.T) {
		s := startServe(t, patientStoreConfig(r.URL(), "open"))
		s.expectReady(t)
		s.check(t, "url-user")
		keyInRedis(t, r, "url-user")
	})
	t.Run("password_file", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "redis.pass"), pass+"\n") // as `echo` or a Kubernetes secret writes it
		s := startServeIn(t, dir, patientStoreConfig(plain, "open", "password_file: redis.pass"))
		s.expectReady(t)
		s.check(t, "file-user")
		keyInRedis(t, r, "file-user")
	})
	t.Run("password_file replaces the URL's", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "redis.pass"), pass)
		s := startServeIn(t, dir, patientStoreConfig(withPassword(r.Addr(), wrong), "open", "password_file: redis.pass"))
		s.expectReady(t)
	})
	for _, tc := range []struct {
		name, url, file, want string
	}{
		{"wrong password in the URL", withPassword(r.Addr(), wrong), "", "WRONGPASS"},
		{"wrong password_file", plain, wrong, "WRONGPASS"},
		{"no password", plain, "", "NOAUTH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var extra []string
			if tc.file != "" {
				writeFile(t, filepath.Join(dir, "redis.pass"), tc.file)
				extra = append(extra, "password_file: redis.pass")
			}
			s := startServeIn(t, dir, patientStoreConfig(tc.url, "open", extra...))
			errText := s.expectUnready(t, tc.want)
			_, _, checkBody := s.check(t, "k")
			_, _, readyBody := s.ready(t)
			for _, text := range []string{errText, checkBody, readyBody, s.logs.String()} {
				if strings.Contains(text, pass) || strings.Contains(text, wrong) {
					t.Errorf("a password leaks: %s", text)
				}
			}
		})
	}
}

// TestServeRedisTLS: rediss:// verifies the server against store.tls.ca_file
// (relative to the config file) without insecure_skip_verify; without a CA
// file the system roots do not know the test CA and verification fails, as
// it does for a server_name the certificate does not hold.
func TestServeRedisTLS(t *testing.T) {
	pki := t.TempDir()
	cert, key, ca := redistest.GenerateTLS(t, pki)
	r := redistest.Start(t, redistest.WithTLS(cert, key, ca))
	if !strings.HasPrefix(r.URL(), "rediss://127.0.0.1:") {
		t.Fatalf("URL %s", r.URL())
	}
	// Each server's config lives in a directory next to the certificates,
	// so ../ca.crt tests the resolution against the config file's directory.
	confDir := func(t *testing.T) string {
		d, err := os.MkdirTemp(pki, "conf")
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, tc := range []struct {
		name  string
		tls   string // the store.tls section, "" for none
		fails string // what /readyz's error says, "" when it must work
	}{
		{"ca_file", "tls: {ca_file: ../ca.crt}", ""},
		{"ca_file and server_name", "tls: {ca_file: ../ca.crt, server_name: localhost}", ""},
		{"system roots", "", "certificate"},
		{"empty tls section: system roots", "tls: {}", "certificate"},
		{"wrong server_name", "tls: {ca_file: ../ca.crt, server_name: redis.example.com}", "certificate"},
		{"insecure_skip_verify", "tls: {insecure_skip_verify: true}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var extra []string
			if tc.tls != "" {
				extra = append(extra, tc.tls)
			}
			s := startServeIn(t, confDir(t), patientStoreConfig(r.URL(), "open", extra...))
			if tc.fails != "" {
				s.expectUnready(t, tc.fails)
				return
			}
			s.expectReady(t)
			s.check(t, "tls-user")
			keyInRedis(t, r, "tls-user")
		})
	}
}

// TestServeRedisTLSClientCert: store.tls.cert_file and key_file present a
// client certificate. redistest's TLS server does not ask for one
// (tls-auth-clients no), so this server runs with tls-auth-clients
// optional: a certificate it is given must verify against its CA. The
// pair GenerateTLS makes is also valid for client auth; a pair from another
// CA is refused while no certificate at all is accepted, which shows the
// configured certificate is really sent.
func TestServeRedisTLSClientCert(t *testing.T) {
	pki := t.TempDir()
	cert, key, ca := redistest.GenerateTLS(t, pki)
	other := filepath.Join(pki, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	strangerCert, strangerKey, _ := redistest.GenerateTLS(t, other)
	r := redistest.Start(t, redistest.WithTLS(cert, key, ca), redistest.WithArgs("--tls-auth-clients", "optional"))

	t.Run("trusted client certificate", func(t *testing.T) {
		s := startServe(t, patientStoreConfig(r.URL(), "open",
			fmt.Sprintf("tls: {ca_file: %q, cert_file: %q, key_file: %q}", ca, cert, key)))
		s.expectReady(t)
		keyInRedis(t, r, "probe-"+t.Name())
	})
	t.Run("untrusted client certificate", func(t *testing.T) {
		s := startServe(t, patientStoreConfig(r.URL(), "open",
			fmt.Sprintf("tls: {ca_file: %q, cert_file: %q, key_file: %q}", ca, strangerCert, strangerKey)))
		// The server rejects the handshake; what the client reads then
		// depends on timing (an alert, a reset, EOF), so only unreadiness
		// is checked, repeatedly.
		// The server refuses the handshake; under TLS 1.3 the client learns
		// it from an alert or, as often, from a reset on its first write.
		s.expectUnready(t, "unknown certificate authority", "connection reset")
	})
	t.Run("no client certificate", func(t *testing.T) {
		// The control: optional means a client without a certificate is
		// accepted, so the refusal above is the certificate's.
		s := startServe(t, patientStoreConfig(r.URL(), "open", fmt.Sprintf("tls: {ca_file: %q}", ca)))
		s.expectReady(t)
	})
	t.Run("unreadable key_file", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "sluice.yaml"), patientStoreConfig(r.URL(), "open",
			fmt.Sprintf("tls: {ca_file: %q, cert_file: %q, key_file: missing.key}", ca, cert)))
		writeFile(t, filepath.Join(dir, "envoy.yaml"), envoyConfig)
		o := serveOptions{configs: cli.StringList{filepath.Join(dir, "sluice.yaml")}, httpAddr: "127.0.0.1:0", grpcAddr: "127.0.0.1:0"}
		log, _ := newLogger(&syncBuffer{}, "text", "info")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srv, err := startServer(ctx, o, log)
		if err == nil {
			cancel()
			srv.wait()
			t.Fatal("serve started with an unreadable client key")
		}
		if !strings.Contains(err.Error(), "store.tls") {
			t.Fatalf("startServer: %v, want an error naming store.tls", err)
		}
	})
}

// TestServeLeaksNoSecrets runs serve at debug level, in both log formats,
// with the Redis password in store.url and an admin token, through start-up,
// checks, admin calls, a reload that changes the store section, a rejected
// reload, Redis failing (failing closed, on both APIs) and coming back. Neither
// secret appears in the logs (shutdown included), in any HTTP body or header,
// or in /metrics.
func TestServeLeaksNoSecrets(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) { testLeaksNoSecrets(t, format) })
	}
}

func testLeaksNoSecrets(t *testing.T, format string) {
	pass := secret(t, "pw-")
	pass2 := secret(t, "pw2-") // in the reloaded file
	token := adminTokenFor(t)
	secrets := []string{pass, pass2, token}
	r := redistest.Start(t, redistest.WithPassword(pass))

	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin.token")
	writeFile(t, tokenFile, token+"\n")
	var seen strings.Builder // every HTTP body and header the test received
	var logs *syncBuffer
	// Registered before the server starts, so it runs after the server's
	// own cleanup has shut it down: the shutdown's logs are checked too.
	t.Cleanup(func() {
		if logs == nil {
			return
		}
		out := logs.String()
		for _, sec := range secrets {
			if strings.Contains(out, sec) {
				t.Errorf("secret %q in the %s logs:\n%s", sec, format, out)
			}
		}
		for _, want := range []string{"xxxxx", "stopped", "store circuit breaker", "failing closed", "configuration rejected"} {
			if !strings.Contains(out, want) {
				t.Errorf("the logs lack %q, so the test did not exercise what it claims:\n%s", want, out)
			}
		}
	})
	s := startServeIn(t, dir, patientStoreConfig(r.URL(), "closed"), func(ss *serveSetup) {
		ss.logLevel, ss.logFormat = "debug", format
		ss.opts.adminTokenFile = tokenFile
	})
	logs = s.logs
	hit := func(method, path, body string, header ...string) int {
		t.Helper()
		resp, b := do(t, method, s.base+path, body, header...)
		fmt.Fprintf(&seen, "%s %s → %d %v\n%s\n", method, path, resp.StatusCode, resp.Header, b)
		return resp.StatusCode
	}

	s.expectReady(t)
	hit("POST", "/v1/check", `{"policy":"api","key":"alice"}`)
	hit("GET", "/v1/policies", "")
	hit("GET", "/healthz", "")
	hit("GET", "/readyz", "")
	if code := hit("POST", "/v1/admin/reset", `{"policy":"api","key":"alice"}`, "Authorization", "Bearer "+secret(t, "guess-")); code != 401 {
		t.Errorf("reset with a wrong token: %d", code)
	}
	// The store's timeout is 50 ms and its fail policy closed: on a loaded
	// machine a call may time out and the reset answer 503, as documented.
	testwait.UntilSaw(t, "reset with the token", func() (bool, string) {
		code := hit("POST", "/v1/admin/reset", `{"policy":"api","key":"alice"}`, "Authorization", "Bearer "+token)
		return code == 200, fmt.Sprint(code)
	})

	// A reload that changes the store section (logged, with the URLs) and a
	// rejected one (logged with the problems).
	writeFile(t, s.native, strings.Replace(patientStoreConfig(withPassword(r.Addr(), pass2), "closed"), "limit: 10", "limit: 20", 1))
	testwait.UntilSaw(t, "reloaded", func() (bool, string) {
		return strings.Contains(s.logs.String(), "configuration reloaded"), ""
	})
	bad := strings.Replace(patientStoreConfig(withPassword(r.Addr(), pass), "closed"), "limit: 10", "limit: 0", 1)
	writeFile(t, s.native, strings.Replace(bad, "redis://", "http://", 1))
	testwait.UntilSaw(t, "reload rejected", func() (bool, string) {
		return strings.Contains(s.logs.String(), "configuration rejected"), ""
	})

	// Redis fails: /readyz, checks failing closed on both APIs.
	r.Kill()
	s.expectUnready(t, "store failure")
	conn, err := grpc.NewClient(s.srv.grpcAddr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rls := rlsv3.NewRateLimitServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for range 4 {
		if code := hit("POST", "/v1/check", `{"policy":"api","key":"alice"}`); code != 503 {
			t.Errorf("check with Redis down, failing closed: %d", code)
		}
		resp, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*commonv3.RateLimitDescriptor{
			{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.9"}}},
		}})
		if err != nil {
			t.Fatalf("RLS with Redis down: %v", err)
		}
		fmt.Fprintf(&seen, "RLS → %v\n", resp)
	}
	hit("GET", "/readyz", "")
	hit("GET", "/readyz/store", "")
	hit("GET", "/metrics", "")

	// And comes back.
	r.Restart()
	s.expectReady(t)
	hit("GET", "/readyz", "")
	hit("GET", "/readyz/store", "")
	hit("GET", "/metrics", "")

	out := seen.String()
	for _, sec := range secrets {
		if strings.Contains(out, sec) {
			t.Errorf("secret %q in an HTTP or RLS answer:\n%s", sec, out)
		}
	}
}
