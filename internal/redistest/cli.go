package redistest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

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
	cmd.WaitDelay = time.Second // do not wait on pipes held by anything redis-cli left behind
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
