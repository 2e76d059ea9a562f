// Command sluice runs the Sluice rate limit service and talks to it.
//
//	sluice serve --config FILE      run the service (HTTP API + Envoy RLS gRPC)
//	sluice proxy --config FILE --upstream URL   limit traffic to an HTTP upstream
//	sluice check --policy P --key K ask a running service for a decision
//	sluice override set|list|rm     limits set at runtime for a key or a tenant
//	sluice bench --target URL       load-test a rate limiter (gRPC RLS, HTTP or the library)
//	sluice validate FILE|DIR...     check configuration files
//	sluice version                  print the version (also sluice --version)
//
// Run `sluice help COMMAND` or `sluice COMMAND -h` for a command's flags.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sluicehq/sluice/internal/cli"
)

// command is one subcommand: run gets the arguments after its name and
// returns the process exit status.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"serve", "run the rate limit service: HTTP API and Envoy's rate limit gRPC API", runServe},
		{"proxy", "run a rate-limiting reverse proxy in front of an HTTP upstream", runProxy},
		{"check", "ask a running service whether a request is allowed", runCheck},
		{"release", "give back an in-flight slot a check acquired", runRelease},
		{"override", "set, list and remove limits set at runtime for a key or a tenant", runOverride},
		{"bench", "generate load against a rate limiter and report throughput, latency and decisions", runBench},
		{"validate", "check configuration files and report every problem", runValidate},
		{"version", "print the version", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand; tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 {
			return run(ctx, []string{rest[0], "--help"}, stdout, stderr)
		}
		usage(stdout)
		return 0
	case "--version", "-version":
		return runVersion(ctx, rest, stdout, stderr)
	}
	var names []string
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, rest, stdout, stderr)
		}
		names = append(names, c.name)
	}
	if name == "lab" {
		// The lab is a command of its own, so that this binary does not
		// carry its plotting.
		fmt.Fprintf(stderr, "sluice: the lab is a command of its own: go run ./cmd/sluice-lab %s\n", strings.Join(rest, " "))
		return 2
	}
	what := "command"
	if strings.HasPrefix(name, "-") {
		what = "flag"
	}
	msg := fmt.Sprintf("sluice: unknown %s %q", what, name)
	if guess := cli.Closest(strings.TrimLeft(name, "-"), names); guess != "" && what == "command" {
		msg += fmt.Sprintf("; did you mean %q?", guess)
	}
	fmt.Fprintf(stderr, "%s (sluice -h lists the commands)\n", msg)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Sluice is a distributed rate limiter. This command runs it as a service and talks to it.

Usage:
  sluice COMMAND [flags]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Start here:
  sluice serve --config examples/sluice.yaml
  curl -s -XPOST localhost:8080/v1/check -d '{"policy":"api_per_key","key":"alice"}'

Run "sluice help COMMAND" or "sluice COMMAND -h" for a command's flags,
"sluice --version" for the version.
`)
}
