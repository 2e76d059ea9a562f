package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/loadgen"
)

const benchDescription = `Bench generates load against a rate limiter and reports throughput (decisions
per second), latency percentiles (p50, p90, p99, p99.9) of the decisions, and
how many calls were allowed, denied or failed. A failed call (no answer, an
error) is no decision: it counts under errors only. Each of --concurrency workers keeps one call in flight until --duration
passes or --requests calls were made. Keys are "k0".."k{N-1}" (--keys N),
chosen at random — uniformly, or with --keys-dist zipf "k{i}" in proportion
to 1/(i+1)^s (--zipf-s, 1.1 by default: with 10,000 keys the first takes
about 15% of the calls, the first ten about half); a --hot share of the
calls go to the key "hot" instead.

Targets:
  grpc://host:port   any Envoy RLS v3 server (Sluice, envoyproxy/ratelimit…):
                     one descriptor per request in --domain, built from
                     --descriptor key=value[,key2=value2]. The per-request key
                     replaces the value of the entry written key={key} or just
                     key, else of the last entry: --descriptor tenant=acme,user
                     sends (tenant, acme), (user, k42). --cost is hits_addend.
  http://host:port   Sluice's HTTP API: POST /v1/check for --policy.
  memory://          the library in this process, no network: a limiter with
  redis://host:port  --algorithm, --limit, --period, --burst (default gcra
                     1e9/1s, so nothing is denied unless asked) on that store.

On a concurrency policy (http://, or --algorithm concurrency) each admitted
call gives its slot back at once: a call is an acquisition and its release.

Exit status: 0 when the run completed, 1 when no call got a decision (every
call failed: the target is down or misconfigured), 2 for a usage error.`

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var tc loadgen.TargetConfig
	fs := cli.NewFlagSet("sluice bench", "sluice bench --target URL [--concurrency N] [--duration D] [--requests N] [flags]", benchDescription, stderr)
	target := fs.String("target", "", "what to load: grpc://host:port, http://host:port, memory:// or redis://host:port")
	concurrency := fs.Int("concurrency", 64, "workers, each with one call in flight")
	duration := fs.Duration("duration", 10*time.Second, "stop after this long")
	requests := fs.Int64("requests", 0, "stop after this many calls (0: no cap)")
	keys := fs.Int("keys", 10000, "distinct keys, k0 to k{N-1}")
	hot := fs.Float64("hot", 0, "share of calls (0 to 1) on the single key \"hot\"")
	dist := fs.String("keys-dist", loadgen.Uniform, "how keys are chosen: uniform, or zipf (a few keys take most calls)")
	zipfS := fs.Float64("zipf-s", loadgen.DefaultZipfS, "--keys-dist zipf: the exponent s, above 1")
	fs.Int64Var(&tc.Cost, "cost", 1, "units each call asks for")
	fs.StringVar(&tc.Policy, "policy", "", "policy `name`: the one http:// checks (required there); the library policy's name for memory:// and redis:// (default bench)")
	fs.StringVar(&tc.Domain, "domain", "bench", "gRPC: the rate limit domain")
	fs.StringVar(&tc.Descriptor, "descriptor", "key", "gRPC: the descriptor, `key=value[,key2=value2]`; see above for where the per-request key goes")
	algorithm := fs.String("algorithm", string(sluice.GCRA), "memory:// and redis://: the policy's algorithm")
	fs.Int64Var(&tc.Limit, "limit", 0, "memory:// and redis://: the policy's limit per period (0: 1000000000, so nothing is denied; sliding_log's largest, 10000)")
	fs.DurationVar(&tc.Period, "period", time.Second, "memory:// and redis://: the policy's period")
	fs.Int64Var(&tc.Burst, "burst", 0, "memory:// and redis://: the bucket size of token_bucket, leaky_bucket and gcra (0: the limit)")
	fs.DurationVar(&tc.Timeout, "timeout", 5*time.Second, "give up on one call after this long")
	asJSON := fs.Bool("json", false, "print the summary as one JSON object (and no progress)")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	if code := cli.ParseFlags(fs, args); code >= 0 {
		return code
	}
	if tc.Limit == 0 {
		tc.Limit = 1_000_000_000
		if *algorithm == string(sluice.SlidingLog) {
			tc.Limit = sluice.MaxSlidingLogLimit
		}
	}
	switch {
	case *target == "":
		fmt.Fprintln(stderr, "bench: --target is required (e.g. --target memory:// or --target grpc://127.0.0.1:8081)")
		return 2
	case *concurrency < 1:
		fmt.Fprintln(stderr, "bench: --concurrency must be at least 1")
		return 2
	case *keys < 1:
		fmt.Fprintln(stderr, "bench: --keys must be at least 1")
		return 2
	case !(*hot >= 0 && *hot <= 1):
		fmt.Fprintln(stderr, "bench: --hot must be between 0 and 1")
		return 2
	case *dist != loadgen.Uniform && *dist != loadgen.Zipf:
		fmt.Fprintln(stderr, "bench: --keys-dist must be uniform or zipf")
		return 2
	case !(*zipfS > 1 && *zipfS <= 100):
		fmt.Fprintln(stderr, "bench: --zipf-s must be above 1 (and at most 100)")
		return 2
	case tc.Cost < 1:
		fmt.Fprintln(stderr, "bench: --cost must be at least 1")
		return 2
	case *duration <= 0 && *requests <= 0:
		fmt.Fprintln(stderr, "bench: give a positive --duration or --requests")
		return 2
	case *requests < 0:
		fmt.Fprintln(stderr, "bench: --requests must not be negative")
		return 2
	}
	if *duration < 0 {
		*duration = 0
	}
	tc.Algorithm = sluice.Algorithm(*algorithm)
	tc.Concurrency = *concurrency
	tg, err := loadgen.Open(*target, tc)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	defer tg.Close()

	opts := loadgen.Options{Target: tg, Concurrency: *concurrency, Duration: *duration, Requests: *requests,
		Keys: *keys, Hot: *hot, Dist: *dist, ZipfS: *zipfS}
	if !*asJSON && !*quiet {
		opts.Progress = stderr
	}
	s, err := loadgen.Run(ctx, opts)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	if *asJSON {
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		out := benchJSON{Target: *target, Concurrency: *concurrency, DurationS: s.Elapsed.Seconds(), Requests: s.Requests,
			ThroughputRPS: s.Throughput, ErrorRPS: s.ErrorRate, P50MS: ms(s.P50), P90MS: ms(s.P90), P99MS: ms(s.P99), P999MS: ms(s.P999),
			Allowed: s.Allowed, Denied: s.Denied, Errors: s.Errors, FirstError: s.FirstError}
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(out); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
	} else {
		printBenchSummary(stdout, *target, opts, s)
	}
	if s.Errors > 0 && s.Decisions() == 0 {
		fmt.Fprintf(stderr, "bench: no call got a decision: all %d failed, the first with: %s\n", s.Errors, s.FirstError)
		return 1
	}
	return 0
}

// benchJSON is --json's output. The first eight fields are the stable
// interface scripts rely on; the rest describe the run. throughput_rps counts
// decisions (allowed and denied), error_rps the failed calls.
type benchJSON struct {
	ThroughputRPS float64 `json:"throughput_rps"`
	P50MS         float64 `json:"p50_ms"`
	P90MS         float64 `json:"p90_ms"`
	P99MS         float64 `json:"p99_ms"`
	P999MS        float64 `json:"p999_ms"`
	Allowed       int64   `json:"allowed"`
	Denied        int64   `json:"denied"`
	Errors        int64   `json:"errors"`
	Target        string  `json:"target"`
	Concurrency   int     `json:"concurrency"`
	DurationS     float64 `json:"duration_s"`
	Requests      int64   `json:"requests"`
	ErrorRPS      float64 `json:"error_rps"`
	FirstError    string  `json:"first_error,omitempty"`
}

func printBenchSummary(w io.Writer, target string, o loadgen.Options, s loadgen.Summary) {
	pct := func(n int64) float64 {
		if s.Requests == 0 {
			return 0
		}
		return 100 * float64(n) / float64(s.Requests)
	}
	keys := fmt.Sprint(o.Keys)
	if o.Dist == loadgen.Zipf {
		keys += fmt.Sprintf(" (zipf, s %g)", o.ZipfS)
	}
	fmt.Fprintf(w, "target       %s, concurrency %d, keys %s, hot %g\n", target, o.Concurrency, keys, o.Hot)
	fmt.Fprintf(w, "requests     %d in %.2fs\n", s.Requests, s.Elapsed.Seconds())
	if s.Decisions() == 0 {
		fmt.Fprintf(w, "throughput   none: no call got a decision\n")
		fmt.Fprintf(w, "latency      none\n")
	} else {
		fmt.Fprintf(w, "throughput   %.0f decisions/s\n", s.Throughput)
		fmt.Fprintf(w, "latency      p50 %v  p90 %v  p99 %v  p99.9 %v  max %v (of the decisions)\n", s.P50, s.P90, s.P99, s.P999, s.Max)
	}
	fmt.Fprintf(w, "allowed      %d (%.1f%%)\n", s.Allowed, pct(s.Allowed))
	fmt.Fprintf(w, "denied       %d (%.1f%%)\n", s.Denied, pct(s.Denied))
	fmt.Fprintf(w, "errors       %d (%.1f%%), %.0f/s\n", s.Errors, pct(s.Errors), s.ErrorRate)
	if s.FirstError != "" {
		fmt.Fprintf(w, "first error  %s\n", s.FirstError)
	}
}
