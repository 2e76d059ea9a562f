// Command sluice-lab reproduces the ways a distributed rate limiter admits more
// than its limit, and runs Sluice through the same traffic:
//
//	go run ./cmd/sluice-lab SCENARIO [--store URL] [--nodes N] [--plot FILE] [--json]
//
// It is a command of its own, apart from sluice, so that the production binary
// does not carry the lab's plotting. See docs/lab.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/lab"
)

const labDescription = `Reproduce the ways a distributed rate limiter admits more than its limit,
and run Sluice through the same traffic. SCENARIO is one of:

  boundary     bursts of L just before and after a window edge, every algorithm
  nodes        a counter per node versus one shared store
  stale-cache  nodes caching a shared count and syncing every S (--sync)
  race         nodes doing GET, compare, SET versus Sluice's atomic decision
  skew         windows from each node's skewed clock (--skew) versus one time source
  accuracy     sliding_window against the exact sliding_log on a bursty trace
  hybrid       quota leases versus local counters synced every interval versus exact
  fairness     tenants sharing one limit, one asking 100x its share: one global
               limit versus fair share (--tenants)
  usage        costs known after the response (check, then charge what fits
               versus Limiter.Charge), and a node killed holding in-flight
               slots (a counter versus slots with a lease)

Each row reports max_in_span, the most admitted in the worst span the policy
bounds, and overshoot = max_in_span / bound: above 1 the limit was broken.
The naive variants show what NOT to do. See docs/lab.md.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runLab(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// runLab is `sluice-lab SCENARIO [flags]`.
func runLab(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice-lab", "sluice-lab SCENARIO [flags]", labDescription, stderr)
	var o lab.Options
	var syncs, plotFile string
	var asJSON bool
	var seed uint64
	fs.StringVar(&o.Store, "store", "memory://", "the store `URL`: memory:// or redis://host:port")
	fs.IntVar(&o.Nodes, "nodes", 4, "the number of simulated nodes")
	fs.Int64Var(&o.Limit, "limit", 100, "L, units per period")
	fs.DurationVar(&o.Period, "period", time.Second, "P, the period (skew on Redis uses at most 200ms)")
	fs.IntVar(&o.Windows, "windows", 5, "periods the virtual-time scenarios run")
	fs.StringVar(&syncs, "sync", "0,50ms,100ms,200ms,400ms,800ms", "stale-cache: comma-separated sync `intervals`")
	fs.DurationVar(&o.Skew, "skew", 30*time.Millisecond, "skew: the largest difference between node clocks")
	fs.IntVar(&o.Rounds, "rounds", 5, "race: rounds of the contest")
	fs.IntVar(&o.Sources, "sources", 1000, "accuracy: independent sources in the trace")
	fs.Uint64Var(&seed, "seed", 1, "accuracy, usage: the random seed of the trace or the costs")
	fs.IntVar(&o.Tenants, "tenants", 5, "fairness: tenants sharing the limit")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&plotFile, "plot", "", "also draw the report into `FILE` (.png or .svg)")

	// The scenario may come before or after the flags.
	rest, code := cli.ParseArgs(fs, args)
	if code >= 0 {
		return code
	}
	var scenario string
	if len(rest) > 0 {
		scenario, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 {
		return cli.UsageError(fs, fmt.Sprintf("unexpected argument %q (name one scenario)", rest[0]))
	}
	if scenario == "" {
		fmt.Fprintf(stderr, "sluice-lab: name a scenario: %s\n", strings.Join(lab.Scenarios, ", "))
		return 2
	}
	if !slices.Contains(lab.Scenarios, scenario) {
		fmt.Fprintf(stderr, "sluice-lab: unknown scenario %q (want one of %s)\n", scenario, strings.Join(lab.Scenarios, ", "))
		return 2
	}
	o.Seed = seed
	o.Sync = []time.Duration{}
	for _, s := range strings.Split(syncs, ",") {
		s = strings.TrimSpace(s)
		if s == "0" {
			s = "0s"
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			fmt.Fprintf(stderr, "sluice-lab: --sync: %v\n", err)
			return 2
		}
		o.Sync = append(o.Sync, d)
	}

	r, err := lab.Run(ctx, scenario, o)
	if err != nil {
		fmt.Fprintf(stderr, "sluice-lab: %s\n", strings.TrimPrefix(err.Error(), "lab: "))
		return 1
	}
	if asJSON {
		err = r.WriteJSON(stdout)
	} else {
		err = r.WriteTable(stdout)
	}
	if err == nil && plotFile != "" {
		err = r.Plot(plotFile)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice-lab: %v\n", err)
		return 1
	}
	return 0
}
