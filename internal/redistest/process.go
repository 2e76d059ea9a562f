package redistest

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

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
