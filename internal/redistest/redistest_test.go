package redistest

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testwait"
)

// rawPing sends an inline PING on a fresh connection and returns the reply
// line, bounded by timeout: the probe for Pause, which must not hang.
func rawPing(addr string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return pingConn(conn, timeout)
}

func pingConn(conn net.Conn, timeout time.Duration) (string, error) {
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

func mustDo(t *testing.T, s *Server, args ...string) string {
	t.Helper()
	out, err := s.Do(args...)
	if err != nil {
		t.Fatalf("Do(%q): %v", args, err)
	}
	return out
}

func TestStartKillRestart(t *testing.T) {
	t.Parallel()
	s := Start(t)
	if want := "127.0.0.1:" + strconv.Itoa(s.Port()); s.Addr() != want {
		t.Errorf("Addr() = %q, want %q", s.Addr(), want)
	}
	if want := "redis://" + s.Addr(); s.URL() != want {
		t.Errorf("URL() = %q, want %q", s.URL(), want)
	}
	if got := mustDo(t, s, "PING"); got != "PONG" {
		t.Fatalf("PING = %q", got)
	}
	mustDo(t, s, "SET", "k", "v 1")
	if got := mustDo(t, s, "GET", "k"); got != "v 1" {
		t.Fatalf("GET = %q, want %q", got, "v 1")
	}

	s.Kill()
	s.Kill() // idempotent
	if _, err := rawPing(s.Addr(), 500*time.Millisecond); err == nil {
		t.Fatal("PING answered after Kill")
	}
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("Do succeeded after Kill")
	}

	port := s.Port()
	s.Restart()
	if s.Port() != port {
		t.Fatalf("Restart moved the server from port %d to %d", port, s.Port())
	}
	if got := mustDo(t, s, "PING"); got != "PONG" {
		t.Fatalf("PING after Restart = %q", got)
	}
	// Persistence is off, so a crash loses everything, as in production without AOF.
	if got := mustDo(t, s, "DBSIZE"); got != "0" {
		t.Errorf("DBSIZE after Restart = %q, want 0", got)
	}
	mustDo(t, s, "SET", "k", "v2")
	if got := mustDo(t, s, "GET", "k"); got != "v2" {
		t.Fatalf("GET after Restart = %q", got)
	}
	s.Restart() // on a running server: kill, then start again
	if got := mustDo(t, s, "PING"); got != "PONG" {
		t.Fatalf("PING after second Restart = %q", got)
	}
}

func TestErrorReply(t *testing.T) {
	t.Parallel()
	if !cliHasE() {
		t.Skip("redis-cli has no -e (Redis < 6.2): error replies are not reported as errors")
	}
	s := Start(t)
	out, err := s.Do("NOSUCHCOMMAND")
	if err == nil || !strings.Contains(err.Error(), "ERR unknown command") {
		t.Fatalf("Do(NOSUCHCOMMAND) = %q, %v; want an error carrying the ERR reply", out, err)
	}
}

func TestWithArgs(t *testing.T) {
	t.Parallel()
	s := Start(t, WithArgs("--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru"))
	if got := mustDo(t, s, "CONFIG", "GET", "maxmemory"); got != "maxmemory\n10485760" {
		t.Errorf("CONFIG GET maxmemory = %q", got)
	}
	if got := mustDo(t, s, "CONFIG", "GET", "save"); got != "save" {
		t.Errorf("CONFIG GET save = %q, want persistence off", got)
	}
}

func TestCleanupKillsServer(t *testing.T) {
	t.Parallel()
	var pid int
	var addr string
	t.Run("inner", func(t *testing.T) {
		s := Start(t)
		s.Pause() // cleanup must kill a frozen server too
		s.mu.Lock()
		pid = s.proc.cmd.Process.Pid
		s.mu.Unlock()
		addr = s.Addr()
	})
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("redis-server pid %d still exists after the test ended (kill 0: %v)", pid, err)
	}
	if _, err := rawPing(addr, 300*time.Millisecond); err == nil {
		t.Errorf("%s still answers after the test ended", addr)
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	s := Start(t)
	held, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	s.Pause()
	s.Pause() // idempotent
	if reply, err := rawPing(s.Addr(), 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("PING to a paused server = %q, %v; want a timeout", reply, err)
	}
	if reply, err := pingConn(held, 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("PING on an open connection to a paused server = %q, %v; want a timeout", reply, err)
	}
	s.Resume()
	s.Resume() // idempotent
	if reply, err := rawPing(s.Addr(), 2*time.Second); err != nil || reply != "+PONG" {
		t.Fatalf("PING after Resume = %q, %v", reply, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestPassword(t *testing.T) {
	t.Parallel()
	const pass = "s3cret pass/word" // space and slash: must survive RESP and URL encoding
	s := Start(t, WithPassword(pass))
	if reply, err := rawPing(s.Addr(), 2*time.Second); err != nil || !strings.HasPrefix(reply, "-NOAUTH") {
		t.Fatalf("unauthenticated PING = %q, %v; want -NOAUTH", reply, err)
	}
	if got := mustDo(t, s, "PING"); got != "PONG" {
		t.Fatalf("authenticated PING = %q", got)
	}
	if want := "redis://:s3cret%20pass%2Fword@" + s.Addr(); s.URL() != want {
		t.Errorf("URL() = %q, want %q", s.URL(), want)
	}
	// And with the password, a plain client succeeds too.
	conn, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write(appendCommand(appendCommand(nil, "AUTH", pass), "PING")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	for _, want := range []string{"+OK", "+PONG"} {
		line, err := r.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != want {
			t.Fatalf("reply = %q, %v; want %s", line, err, want)
		}
	}
	s.Restart() // readiness probe must authenticate on restart too
	if got := mustDo(t, s, "PING"); got != "PONG" {
		t.Fatalf("PING after Restart = %q", got)
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, caFile := GenerateTLS(t, t.TempDir())
	s := Start(t, WithTLS(certFile, keyFile, caFile), WithPassword("pw"))
	if want := "rediss://:pw@" + s.Addr(); s.URL() != want {
		t.Errorf("URL() = %q, want %q", s.URL(), want)
	}
	if got := mustDo(t, s, "PING"); got != "PONG" {
		t.Fatalf("PING over TLS = %q", got)
	}

	// A verifying Go client trusts the generated CA for both names in the SAN.
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA file holds no certificate")
	}
	for _, name := range []string{"127.0.0.1", "localhost"} {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", s.Addr(),
			&tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatalf("TLS handshake verifying %s: %v", name, err)
		}
		reply, err := pingConn(conn, 2*time.Second)
		conn.Close()
		if err != nil || !strings.HasPrefix(reply, "-NOAUTH") {
			t.Fatalf("PING over verified TLS (%s) = %q, %v; want -NOAUTH", name, reply, err)
		}
	}

	// Plain text on the TLS port gets no PONG.
	if reply, err := rawPing(s.Addr(), 500*time.Millisecond); err == nil && reply == "+PONG" {
		t.Fatal("plain-text PING answered on the TLS port")
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := StartCluster(t, 3, 0)
	t.Logf("StartCluster(3, 0) took %v", time.Since(start).Round(time.Millisecond))
	if len(c.Nodes) != 3 {
		t.Fatalf("%d nodes, want 3", len(c.Nodes))
	}
	for _, n := range c.Nodes {
		if info := mustDo(t, n, "CLUSTER", "INFO"); !strings.Contains(info, "cluster_state:ok") {
			t.Fatalf("%s: CLUSTER INFO:\n%s", n.Addr(), info)
		}
	}
	a := c.Addrs()
	if want := fmt.Sprintf("redis://%s?addr=%s&addr=%s", a[0], a[1], a[2]); c.URL() != want {
		t.Errorf("URL() = %q, want %q", c.URL(), want)
	}
	if m := c.Masters(); len(m) != 3 {
		t.Errorf("Masters() = %d nodes, want 3", len(m))
	}

	// Keys in different slots are spread over the masters; -c follows MOVED.
	slots := map[string]bool{}
	keys := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}
	for _, k := range keys {
		slots[mustDo(t, c.Nodes[0], "CLUSTER", "KEYSLOT", k)] = true
	}
	if len(slots) < 2 {
		t.Fatalf("keys %v all hash to one slot", keys)
	}
	for _, k := range keys {
		mustDo(t, c.Nodes[0], "-c", "SET", k, "v-"+k)
	}
	moved := 0
	for _, k := range keys {
		if got := mustDo(t, c.Nodes[1], "-c", "GET", k); got != "v-"+k {
			t.Errorf("GET %s via node 1 = %q", k, got)
		}
		out, err := c.Nodes[1].Do("GET", k)
		if err != nil && strings.Contains(err.Error(), "MOVED") || strings.HasPrefix(out, "MOVED") {
			moved++
		}
	}
	if moved == 0 {
		t.Error("no key was MOVED away from node 1: slots not spread over the masters?")
	}
}

func TestClusterReplicas(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := StartCluster(t, 3, 1)
	t.Logf("StartCluster(3, 1) took %v", time.Since(start).Round(time.Millisecond))
	if len(c.Nodes) != 6 {
		t.Fatalf("%d nodes, want 6", len(c.Nodes))
	}
	masters := c.Masters()
	if len(masters) != 3 {
		t.Fatalf("Masters() = %d nodes, want 3", len(masters))
	}
	for i, m := range masters {
		if m != c.Nodes[i] {
			t.Errorf("Masters() = %v, want the first three Nodes %v", addrs(masters), c.Addrs()[:3])
			break
		}
	}
	if testing.Short() {
		return
	}

	// The use the chaos tests make of it: kill a master, a replica takes over.
	victim := masters[0]
	victim.Kill()
	start = time.Now()
	testwait.UntilSaw(t, "a fail-over after killing master "+victim.Addr(), func() (bool, string) {
		ms := c.Masters()
		ok := len(ms) == 3
		for _, m := range ms {
			ok = ok && m != victim
		}
		return ok, fmt.Sprint("masters ", addrs(ms))
	})
	t.Logf("fail-over after %v", time.Since(start).Round(time.Millisecond))
	testwait.UntilSaw(t, "the cluster ok after the fail-over", func() (bool, string) {
		info := mustDo(t, c.Nodes[len(c.Nodes)-1], "CLUSTER", "INFO")
		return strings.Contains(info, "cluster_state:ok"), "\n" + info
	})

	// The old master comes back (same port, same nodes.conf) as a replica.
	victim.Restart()
	testwait.UntilSaw(t, "the restarted old master a replica", func() (bool, string) {
		role := mustDo(t, victim, "ROLE")
		return strings.HasPrefix(role, "slave"), "ROLE " + role
	})
}

func addrs(ss []*Server) []string {
	var a []string
	for _, s := range ss {
		a = append(a, s.Addr())
	}
	return a
}

func TestBadClusterSize(t *testing.T) {
	f := &fakeTB{TB: t}
	f.run(func() { StartCluster(f, 2, 0) })
	if !strings.Contains(f.fatal, "at least 3 masters") {
		t.Errorf("StartCluster(2, 0) fatal = %q", f.fatal)
	}
}

// fakeTB records Fatalf and Skip instead of ending the real test, to check
// what requireRedis does when Redis is missing.
type fakeTB struct {
	testing.TB
	fatal, skip string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	panic(f)
}

func (f *fakeTB) Skip(args ...any) {
	f.skip = fmt.Sprint(args...)
	panic(f)
}

// run calls fn, absorbing the panic that stands in for runtime.Goexit.
func (f *fakeTB) run(fn func()) {
	defer func() {
		if r := recover(); r != nil && r != any(f) {
			panic(r)
		}
	}()
	fn()
}

func TestMissingRedis(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // nothing on PATH
	if Available() {
		t.Fatal("Available() with an empty PATH")
	}
	for _, tc := range []struct {
		ci       string
		wantFail bool
	}{
		{"true", true},
		{"1", true},
		{"", false},
		{"false", false},
	} {
		t.Setenv("CI", tc.ci)
		f := &fakeTB{TB: t}
		f.run(func() { Start(f) })
		switch {
		case tc.wantFail && (f.fatal == "" || f.skip != ""):
			t.Errorf("CI=%q: want a failure, got fatal=%q skip=%q", tc.ci, f.fatal, f.skip)
		case !tc.wantFail && (f.skip == "" || f.fatal != ""):
			t.Errorf("CI=%q: want a skip, got fatal=%q skip=%q", tc.ci, f.fatal, f.skip)
		}
		if msg := f.fatal + f.skip; !strings.Contains(msg, "make test") || !strings.Contains(msg, "scripts/ensure-redis.sh") {
			t.Errorf("CI=%q: message %q lacks the install hint", tc.ci, msg)
		}
	}
}
