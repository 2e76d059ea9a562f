package main

import (
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/cli"
)

// TestUnknownFlagIsOneLine: a mistyped flag gets one line naming it, the flag
// meant and where help is — not the whole help.
func TestUnknownFlagIsOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--confg", "x.yaml"}, []string{"unknown flag --confg", "did you mean --config?", "sluice serve -h"}},
		{[]string{"serve", "-htp-addr=:1"}, []string{"unknown flag --htp-addr", "did you mean --http-addr?"}},
		{[]string{"check", "--polcy", "p"}, []string{"unknown flag --polcy", "did you mean --policy?", "sluice check -h"}},
		{[]string{"validate", "--zzzzzz"}, []string{"unknown flag --zzzzzz", "sluice validate -h"}},
		{[]string{"bench", "--concurency", "3"}, []string{"did you mean --concurrency?"}},
		{[]string{"lab", "boundary"}, []string{"the lab is a command of its own: go run ./cmd/sluice-lab boundary"}},
		{[]string{"serve", "--http-addr"}, []string{"flag --http-addr needs a value"}},
		{[]string{"check", "--cost", "abc"}, []string{`--cost "abc": want a whole number`}},
		{[]string{"serve", "--shutdown-timeout", "10"}, []string{`--shutdown-timeout "10": want a duration`}},
		{[]string{"version", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"serve", "examples/sluice.yaml"}, []string{`unexpected argument "examples/sluice.yaml"; did you mean --config examples/sluice.yaml?`}},
		{[]string{"serv"}, []string{`unknown command "serv"; did you mean "serve"?`}},
		{[]string{"--frobnicate"}, []string{`unknown flag "--frobnicate"`, "sluice -h"}},
	} {
		code, out, errOut := runCmd(tc.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if out != "" || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: want one line on stderr and nothing on stdout, got stdout %q stderr %q", tc.args, out, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: %q lacks %q", tc.args, errOut, w)
			}
		}
		if strings.Contains(errOut, "Usage:") {
			t.Errorf("%v: printed the help: %q", tc.args, errOut)
		}
	}
}

// singleDashFlag finds a flag written -name in help text (-h, the one short
// form the texts mention, and curl's -s do not match).
var singleDashFlag = regexp.MustCompile(`(^|[\s(\[])-[a-z][a-z-]+`)

// TestHelpAtEveryLevel: sluice -h/--help/help, sluice help X, sluice X -h and
// sluice X --help all print help and exit 0, and every help text spells flags
// --name.
func TestHelpAtEveryLevel(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		code, out, _ := runCmd(args...)
		if code != 0 || !strings.Contains(out, "Commands:") {
			t.Errorf("%v: exit %d %q", args, code, out)
		}
		if m := singleDashFlag.FindString(out); m != "" {
			t.Errorf("%v: help spells a flag %q", args, m)
		}
	}
	for _, c := range commands() {
		for _, args := range [][]string{{c.name, "-h"}, {c.name, "--help"}, {"help", c.name}} {
			code, out, errOut := runCmd(args...)
			help := out + errOut
			if code != 0 || !strings.Contains(help, "Usage: sluice "+c.name) {
				t.Errorf("%v: exit %d %q", args, code, help)
			}
			for _, line := range strings.Split(help, "\n") {
				if m := singleDashFlag.FindString(line); m != "" {
					t.Errorf("%v: help spells a flag %q in %q", args, m, line)
				}
			}
		}
	}
	code, out, _ := runCmd("--version")
	_, want, _ := runCmd("version")
	if code != 0 || out != want || !strings.HasPrefix(out, "sluice ") {
		t.Errorf("--version: exit %d %q, version printed %q", code, out, want)
	}
}

// TestValidatePositionalArguments: files may be given as arguments, with
// --config, and with flags between them.
func TestValidatePositionalArguments(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	writeFile(t, a, nativeConfig)
	writeFile(t, b, envoyConfig)
	for _, args := range [][]string{
		{"validate", a, b},
		{"validate", "--config", a, b},
		{"validate", a, "--store", "memory://", b},
		{"validate", "--", a, b},
	} {
		code, out, errOut := runCmd(args...)
		if code != 0 || !strings.Contains(out, "in 2 files") {
			t.Errorf("%v: exit %d %q %q", args, code, out, errOut)
		}
	}
	if code, _, errOut := runCmd("validate"); code != 2 || !strings.Contains(errOut, "name at least one") {
		t.Errorf("validate without files: exit %d %q", code, errOut)
	}
}

// TestCheckServerWithoutScheme: --server host:port means http://host:port;
// another scheme is refused with a clear line.
func TestCheckServerWithoutScheme(t *testing.T) {
	srv, _, _ := startTestServer(t, "")
	_, port, _ := net.SplitHostPort(srv.httpAddr.String())
	for _, server := range []string{"localhost:" + port, "127.0.0.1:" + port + "/", "http://127.0.0.1:" + port} {
		code, out, errOut := runCmd("check", "--server", server, "--policy", "api_per_key", "--key", "k", "--cost", "0")
		if code != 0 || !strings.HasPrefix(out, "peek: ") {
			t.Errorf("--server %s: exit %d %q %q", server, code, out, errOut)
		}
	}
	code, _, errOut := runCmd("check", "--server", "grpc://127.0.0.1:"+port, "--policy", "p", "--key", "k")
	if code != 2 || !strings.Contains(errOut, "http:// or https://") {
		t.Errorf("grpc:// server: exit %d %q", code, errOut)
	}
}

func TestClosest(t *testing.T) {
	names := []string{"config", "store", "http-addr", "grpc-addr", "log-level", "log-format"}
	for in, want := range map[string]string{
		"confg": "config", "config": "config", "stor": "store", "htp-addr": "http-addr",
		"grpc-adr": "grpc-addr", "log-lvl": "log-level", "log-f": "log-format", "log": "",
		"zzzzzz": "", "x": "",
	} {
		if got := cli.Closest(in, names); got != want {
			t.Errorf("cli.Closest(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestVersionStamp: the variable `make build` sets with -X main.version is
// what sluice version and sluice --version print.
func TestVersionStamp(t *testing.T) {
	saved := version
	version = "v1.2.3-test"
	defer func() { version = saved }()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if code, out, _ := runCmd(args...); code != 0 || !strings.HasPrefix(out, "sluice v1.2.3-test (go") {
			t.Errorf("%v: exit %d %q", args, code, out)
		}
	}
}

// TestMakeBuildStampsVersion: `make build` passes git describe's answer (or
// VERSION) to -X main.version — the variable TestVersionStamp shows is
// printed — and writes bin/sluice. make -n prints the command without the
// minutes a build takes on a loaded machine.
func TestMakeBuildStampsVersion(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	described, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	for version, want := range map[string]string{
		"":       strings.TrimSpace(string(described)),
		"v1.2.3": "v1.2.3",
	} {
		args := []string{"-s", "-n", "-C", filepath.Join("..", ".."), "build"}
		if version != "" {
			args = append(args, "VERSION="+version)
		}
		out, err := exec.Command("make", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("make %v: %v\n%s", args, err, out)
		}
		cmd := string(out)
		for _, part := range []string{`-ldflags "-X main.version=` + want + `"`, "-o bin/sluice ./cmd/sluice"} {
			if !strings.Contains(cmd, part) {
				t.Errorf("make %v runs %q, which lacks %q", args, cmd, part)
			}
		}
	}
}
