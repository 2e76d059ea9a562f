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
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// Do runs redis-cli against the server (with the TLS and password flags the
// server needs) and returns its trimmed stdout, for test set-up and
// inspection: SCRIPT FLUSH, DBSIZE, MEMORY USAGE, INFO, CLUSTER ... Options
// for redis-cli may lead args, e.g. Do("-c", "SET", "k", "v") to follow
// cluster redirections. An error reply from the server (ERR, NOAUTH, MOVED
// without -c, ...) comes back as an error whose text includes the reply, with
// an empty string; that needs redis-cli -e (Redis >= 6.2), without which the
// reply is returned as the string with a nil error. Each call is bounded by
// ~10 s, so Do on a paused server returns an error after 10 s.
func (s *Server) Do(args ...string) (string, error) {
	return runCLI(doTimeout, append(s.cliArgs(), args...)...)
}

// cliArgs are the redis-cli connection flags for this server.
func (s *Server) cliArgs() []string {
	a := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.port)}
	if cliHasE() {
		a = append(a, "-e")
	}
	if s.cfg.tls {
		a = append(a, "--tls")
		if s.cfg.caFile != "" {
			a = append(a, "--cacert", s.cfg.caFile)
		} else {
			a = append(a, "--insecure")
		}
	}
	if s.cfg.password != "" {
		a = append(a, "-a", s.cfg.password, "--no-auth-warning")
	}
	return a
}

// runCLI runs redis-cli with a deadline; stdin is /dev/null so it never waits
// for input.
func runCLI(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "redis-cli", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Do not wait forever on pipes held by anything redis-cli left behind,
	// but long enough for a loaded machine to copy out what it wrote: at 1s
	// a --cluster create that had succeeded failed (ErrWaitDelay) while
	// several test binaries and CPU burners shared two cores.
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	out := strings.TrimSpace(stdout.String())
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("timed out after %v", timeout)
		}
		msg := strings.TrimSpace(stderr.String() + "\n" + out)
		return out, fmt.Errorf("redis-cli %s: %w: %s", strings.Join(redactArgs(args), " "), err, msg)
	}
	return out, nil
}

// redactArgs hides the value after -a so passwords do not end up in test logs.
func redactArgs(args []string) []string {
	r := append([]string(nil), args...)
	for i := range len(r) - 1 {
		if r[i] == "-a" {
			r[i+1] = "***"
		}
	}
	return r
}

var (
	cliHasEOnce sync.Once
	cliHasEVal  bool
)

// cliHasE reports whether redis-cli understands -e (exit non-zero on an error
// reply, Redis >= 6.2); older versions reject the flag outright.
func cliHasE() bool {
	cliHasEOnce.Do(func() {
		_, err := runCLI(doTimeout, "-e", "--version")
		cliHasEVal = err == nil
	})
	return cliHasEVal
}

// serverArgs is the redis-server command line: everything on it, no config
// file, persistence off, loopback only, logging to a file Start can quote.
func (s *Server) serverArgs() []string {
	port := strconv.Itoa(s.port)
	a := []string{
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", s.logFile,
	}
	if s.cfg.tls {
		a = append(a, "--port", "0", "--tls-port", port,
			"--tls-cert-file", s.cfg.certFile,
			"--tls-key-file", s.cfg.keyFile,
			"--tls-auth-clients", "no")
		if s.cfg.caFile != "" {
			a = append(a, "--tls-ca-cert-file", s.cfg.caFile)
		}
	} else {
		a = append(a, "--port", port)
	}
	if s.cfg.password != "" {
		// masterauth too, so replicas in a password-protected cluster can sync.
		a = append(a, "--requirepass", s.cfg.password, "--masterauth", s.cfg.password)
	}
	if s.cfg.cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			// Fail-over tests should take a second or two, not the default 15 s.
			"--cluster-node-timeout", "1000",
			// A replica may always take over, however stale: tests kill masters
			// on purpose and want the fail-over, not Redis' data-age caution.
			"--cluster-replica-validity-factor", "0",
			// Start the first full sync at once instead of after the default 5 s
			// diskless-sync delay, so StartCluster with replicas is quick.
			"--repl-diskless-sync-delay", "0",
		)
	}
	return append(a, s.cfg.args...)
}

// errAddrInUse marks a start that failed because the port was taken, which is
// worth retrying (on another port for Start).
var errAddrInUse = errors.New("address already in use")

// launch starts redis-server and waits until it answers PING. logOffset is
// where this run's log output starts, for the failure message.
func (s *Server) launch(logOffset int64) error {
	cmd := exec.Command("redis-server", s.serverArgs()...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = sysProcAttr()
	// Stdout/Stderr stay nil (/dev/null): the server logs to logFile, and with no
	// pipes Wait cannot block on a descendant holding one open.
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	// This goroutine ends when the process exits; Kill (from t.Cleanup at the
	// latest) makes sure that happens before the test ends.
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc, s.paused = p, false
	s.mu.Unlock()

	err := s.waitReady(p)
	if err == nil {
		return nil
	}
	log := s.logTail(logOffset)
	if strings.Contains(log, "Address already in use") {
		err = fmt.Errorf("%w: %v", errAddrInUse, err)
	}
	return fmt.Errorf("%v; %s", err, log)
}

// waitReady polls PING until the server answers, the process exits, or
// readyTimeout passes.
func (s *Server) waitReady(p *process) error {
	deadline := time.Now().Add(readyTimeout)
	var last error
	for {
		select {
		case <-p.done:
			return fmt.Errorf("redis-server exited during start-up (%v)", p.cmd.ProcessState)
		default:
		}
		if last = s.ping(500 * time.Millisecond); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG from %s within %v (last: %v)", s.Addr(), readyTimeout, last)
		}
		time.Sleep(pollInterval)
	}
}

// ping sends AUTH (if needed) and PING over a raw connection and wants +PONG.
// A raw connection is much cheaper than a redis-cli process per poll, and
// "-LOADING" (still reading a dump) correctly counts as not ready.
func (s *Server) ping(timeout time.Duration) error {
	d := net.Dialer{Timeout: timeout}
	var conn net.Conn
	var err error
	if s.cfg.tls {
		// Readiness only asks "does it answer"; the certificate is the test's
		// business (and verified by clients), so it is not checked here.
		conn, err = tls.DialWithDialer(&d, "tcp", s.Addr(), &tls.Config{InsecureSkipVerify: true})
	} else {
		conn, err = d.Dial("tcp", s.Addr())
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	var req []byte
	replies := 1
	if s.cfg.password != "" {
		req = appendCommand(req, "AUTH", s.cfg.password)
		replies++
	}
	req = appendCommand(req, "PING")
	if _, err := conn.Write(req); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	var line string
	for range replies {
		if line, err = r.ReadString('\n'); err != nil {
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(line, "-") {
			return errors.New(line)
		}
	}
	if line != "+PONG" {
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

// appendCommand encodes a command as a RESP array, which unlike inline
// commands survives spaces and quotes in a password.
func appendCommand(b []byte, args ...string) []byte {
	b = fmt.Appendf(b, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// logTail returns the last lines the server logged since offset, so a failed
// start explains itself in the test output.
func (s *Server) logTail(offset int64) string {
	data, err := os.ReadFile(s.logFile)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if offset > 0 && offset <= int64(len(data)) {
		data = data[offset:]
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "log " + s.logFile + ":\n" + strings.Join(lines, "\n")
}

// cleanup kills the server and gives its port back.
func (s *Server) cleanup() {
	s.Kill()
	if s.port != 0 {
		releasePort(s.port, s.cfg.cluster)
	}
}

// waitStopped polls /proc until the kernel reports pid stopped ('T'), so that
// after Pause returns no request can slip through. Where /proc does not exist
// it returns at once (the signal is still delivered, just not confirmed).
func waitStopped(pid int) {
	stat := fmt.Sprintf("/proc/%d/stat", pid)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		data, err := os.ReadFile(stat)
		if err != nil {
			return
		}
		// The state follows the parenthesised command name, which may contain spaces.
		if i := bytes.LastIndexByte(data, ')'); i >= 0 && i+2 < len(data) {
			if st := data[i+2]; st == 'T' || st == 't' {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// busOffset is where Redis Cluster puts the cluster bus: port+10000.
const busOffset = 10000

// ports remembers the ports (and cluster bus ports) handed out in this test
// binary, so that parallel tests never pick each other's ports between the
// probe and redis-server's bind.
var ports struct {
	sync.Mutex
	used map[int]bool
}

// Ports are picked from [portLow, portHigh): below Linux's ephemeral range
// (32768 and up by default), so that no client socket of this or another
// process can hold one between the probe and redis-server's bind. A client
// dialing a port that is down, such as a store waiting for its Redis to
// start, gets an ephemeral source port — and were that the port it dials,
// TCP would connect it to itself and keep the port from Redis. The range
// also leaves room for the cluster bus ports (port+busOffset) below the
// ephemeral range.
const (
	portLow  = 12000
	portHigh = 32768 - busOffset
)

// reservePort picks a free loopback port below the ephemeral range by
// binding it and closing. For a cluster node the bus port (port+busOffset)
// must be free too.
func reservePort(cluster bool) (int, error) {
	ports.Lock()
	defer ports.Unlock()
	if ports.used == nil {
		ports.used = make(map[int]bool)
	}
	for range 500 {
		p := portLow + mrand.IntN(portHigh-portLow)
		if ports.used[p] || ports.used[p+busOffset] {
			continue
		}
		if _, err := probePort(p); err != nil {
			continue
		}
		if cluster {
			if _, err := probePort(p + busOffset); err != nil {
				continue
			}
			ports.used[p+busOffset] = true
		}
		ports.used[p] = true
		return p, nil
	}
	return 0, errors.New("no free port (pair) found on 127.0.0.1")
}

// probePort binds 127.0.0.1:port (0 = any) and closes it, returning the port.
func probePort(port int) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return 0, err
	}
	p := l.Addr().(*net.TCPAddr).Port
	return p, l.Close()
}

func releasePort(p int, cluster bool) {
	ports.Lock()
	defer ports.Unlock()
	delete(ports.used, p)
	if cluster {
		delete(ports.used, p+busOffset)
	}
}

// GenerateTLS writes a fresh self-signed CA and a server certificate signed by
// it (ECDSA P-256, valid for 127.0.0.1 and localhost, server and client auth)
// into dir as PEM files, for WithTLS and for clients that must trust the CA.
// Generating per test avoids checked-in keys that expire.
func GenerateTLS(t testing.TB, dir string) (certFile, keyFile, caFile string) {
	t.Helper()
	fail := func(what string, err error) {
		t.Helper()
		t.Fatalf("redistest: GenerateTLS: %s: %v", what, err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		fail("CA key", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          randSerial(t),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour), // tolerate clock skew
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		fail("CA certificate", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		fail("parse CA certificate", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		fail("server key", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: randSerial(t),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// Client auth too, so the same pair works for replication/cluster links.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		fail("server certificate", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		fail("marshal server key", err)
	}

	certFile = filepath.Join(dir, "server.crt")
	keyFile = filepath.Join(dir, "server.key")
	caFile = filepath.Join(dir, "ca.crt")
	for _, f := range []struct {
		path, typ string
		der       []byte
		mode      os.FileMode
	}{
		{certFile, "CERTIFICATE", der, 0o644},
		{keyFile, "PRIVATE KEY", keyDER, 0o600},
		{caFile, "CERTIFICATE", caDER, 0o644},
	} {
		data := pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der})
		if err := os.WriteFile(f.path, data, f.mode); err != nil {
			fail("write "+f.path, err)
		}
	}
	return certFile, keyFile, caFile
}

// randSerial returns a random 128-bit serial, as RFC 5280 recommends.
func randSerial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		t.Fatalf("redistest: serial number: %v", err)
	}
	return n
}
