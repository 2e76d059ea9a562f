// Package redistest starts and stops real redis-server processes for tests.
//
// The Redis store, the fail-over chaos tests and the TLS/AUTH tests need a real
// server (Lua semantics, MOVED redirections, replication) that a fake cannot
// give, so each test gets its own throw-away process on a loopback port in
// t.TempDir(), killed by t.Cleanup. Nothing listens beyond 127.0.0.1 and no
// process or goroutine outlives the test that started it.
//
// When redis-server is not installed the tests skip, except under CI=true,
// where they fail: a CI run that silently skipped every Redis test would look
// green while testing nothing.
package redistest

import (
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Time limits. Every wait in this package is bounded so that a wedged server
// fails the test with a message instead of hanging until the go test timeout.
const (
	readyTimeout = 10 * time.Second // redis-server start until it answers PING
	killTimeout  = 10 * time.Second // SIGKILL until the process is reaped
	doTimeout    = 10 * time.Second // one redis-cli invocation
	pollInterval = 10 * time.Millisecond
	startTries   = 5 // fresh ports tried when another process wins the bind race
)

// installHint is shown when redis-server is missing; it names the two ways the
// project installs it.
const installHint = "redis-server/redis-cli not found on PATH: run `make test` (which installs them) or scripts/ensure-redis.sh"

// Available reports whether redis-server and redis-cli are on PATH, for tests
// that want to choose between a real server and something else themselves.
func Available() bool {
	_, errServer := exec.LookPath("redis-server")
	_, errCLI := exec.LookPath("redis-cli")
	return errServer == nil && errCLI == nil
}

// requireRedis skips the test when Redis is not installed, or fails it under
// CI so that a misconfigured CI image cannot turn the Redis tests into skips.
func requireRedis(t testing.TB) {
	t.Helper()
	if Available() {
		return
	}
	if onCI() {
		t.Fatalf("CI=%s and %s", os.Getenv("CI"), installHint)
	}
	t.Skip(installHint)
}

// onCI accepts every spelling strconv.ParseBool treats as true ("true", "1",
// "TRUE", ...) so that no CI spelling can quietly enable skipping.
func onCI() bool {
	v, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && v
}

// config collects what the options set.
type config struct {
	password string
	certFile string
	keyFile  string
	caFile   string
	tls      bool
	args     []string
	cluster  bool // set only by StartCluster: adds the cluster flags and reserves the bus port
}

// Option configures Start.
type Option func(*config)

// WithPassword sets requirepass, for the AUTH tests; Do, URL and the readiness
// probe then authenticate with it.
func WithPassword(pass string) Option {
	return func(c *config) { c.password = pass }
}

// WithTLS serves TLS only: tls-port is the chosen port and the plain port is
// 0, so a test cannot pass by accidentally talking plain text. Client
// certificates are not required (tls-auth-clients no), so clients need only
// the CA. GenerateTLS makes suitable files.
func WithTLS(certFile, keyFile, caFile string) Option {
	return func(c *config) {
		c.tls = true
		c.certFile, c.keyFile, c.caFile = certFile, keyFile, caFile
	}
}

// WithArgs appends extra redis-server arguments, e.g. "--maxmemory", "10mb".
// They come last on the command line, so they override the defaults here.
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// withCluster makes the node a cluster node; unexported because StartCluster
// is the only sensible way to get a working cluster.
func withCluster() Option {
	return func(c *config) { c.cluster = true }
}

// Server is one redis-server process owned by a test. Kill, Pause and Resume
// may be called from any goroutine (chaos tests inject faults concurrently);
// Start and Restart report failures with t.Fatalf, so call them from the test
// goroutine.
type Server struct {
	t       testing.TB
	cfg     config
	dir     string
	logFile string
	port    int

	mu     sync.Mutex
	proc   *process // nil when killed
	paused bool
}

// process is one run of redis-server; Restart makes a new one.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
}

// Start starts a redis-server on a free 127.0.0.1 port in t.TempDir() and
// registers t.Cleanup to kill it (the directory goes with t.TempDir's own
// cleanup, which runs after ours). It returns once the server answers PING,
// and fails the test, with the tail of the server log, if it does not within
// ~10 s.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	requireRedis(t)
	s := &Server{t: t}
	for _, o := range opts {
		o(&s.cfg)
	}
	s.dir = t.TempDir()
	s.logFile = filepath.Join(s.dir, "redis.log")
	t.Cleanup(s.cleanup)

	var err error
	for try := 0; try < startTries; try++ {
		if s.port, err = reservePort(s.cfg.cluster); err != nil {
			break
		}
		_ = os.Remove(s.logFile) // so the failure message shows this attempt only
		if err = s.launch(0); err == nil {
			return s
		}
		s.Kill()
		releasePort(s.port, s.cfg.cluster)
		s.port = 0
		if !errors.Is(err, errAddrInUse) {
			break
		}
	}
	t.Fatalf("redistest: start redis-server: %v", err)
	return nil
}

// Addr is the "127.0.0.1:PORT" address clients dial.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the server's (TLS or plain) port, the same across Restart.
func (s *Server) Port() int { return s.port }

// URL is the address in redis:// form ("rediss://" with TLS, and the password
// in the userinfo with WithPassword), for clients configured by URL.
func (s *Server) URL() string {
	u := url.URL{Scheme: "redis", Host: s.Addr()}
	if s.cfg.tls {
		u.Scheme = "rediss"
	}
	if s.cfg.password != "" {
		u.User = url.UserPassword("", s.cfg.password)
	}
	return u.String()
}

// Kill sends SIGKILL to the server's process group and waits until it has
// exited, simulating a crash. It is idempotent, and also works on a paused
// server.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

func (s *Server) killLocked() {
	p := s.proc
	if p == nil {
		return
	}
	s.proc, s.paused = nil, false
	select {
	case <-p.done:
		return // already exited (crashed or failed to start)
	default:
	}
	// The negative pid signals the whole group, so a fork child (BGSAVE,
	// diskless sync) dies with its parent.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	timer := time.NewTimer(killTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		s.t.Errorf("redistest: redis-server pid %d did not exit %v after SIGKILL", p.cmd.Process.Pid, killTimeout)
	}
}

// Restart starts the server again on the same port and directory, so clients
// and cluster peers find it where it was (a cluster node keeps its identity
// from nodes.conf). A running server is killed first. It returns once the
// server answers PING.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	var err error
	for try := 0; try < startTries; try++ {
		if try > 0 {
			time.Sleep(200 * time.Millisecond) // the port may be briefly held by someone else
		}
		var offset int64
		if fi, statErr := os.Stat(s.logFile); statErr == nil {
			offset = fi.Size()
		}
		if err = s.launch(offset); err == nil {
			return
		}
		s.Kill()
		if !errors.Is(err, errAddrInUse) {
			break
		}
	}
	s.t.Fatalf("redistest: restart redis-server on %s: %v", s.Addr(), err)
}

// Pause freezes the server with SIGSTOP: connections stay open but nothing is
// answered, which is how a GC pause or network partition looks to a client.
// It returns once the kernel reports the process stopped (on Linux). It does
// nothing to a killed or already paused server.
func (s *Server) Pause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.paused {
		return
	}
	pid := s.proc.cmd.Process.Pid
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		s.t.Errorf("redistest: SIGSTOP %d: %v", pid, err)
		return
	}
	s.paused = true
	waitStopped(pid)
}

// Resume undoes Pause with SIGCONT.
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || !s.paused {
		return
	}
	if err := syscall.Kill(-s.proc.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		s.t.Errorf("redistest: SIGCONT %d: %v", s.proc.cmd.Process.Pid, err)
	}
	s.paused = false
}

// serving reports whether the process is running and not paused, i.e.
// whether a command sent to it can be expected to be answered.
func (s *Server) serving() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.paused
}
