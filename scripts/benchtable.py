#!/usr/bin/env python3
"""Turns `go test -bench . -count N ./memory/` output into the markdown table of
docs/benchmarks.md: medians per benchmark, and each Sluice figure as a ratio to
the x/time/rate map peer measured in the same run.

    scripts/benchtable.py bench.txt          # wall-clock ns/op
    scripts/benchtable.py bench.txt cpu      # cpu-ns/op: process CPU time per decision

Parallel runs at several -cpu values (GOMAXPROCS) get a row each.
"""
import collections, re, statistics, sys

ALGS = ["fixed_window", "sliding_log", "sliding_window", "token_bucket", "leaky_bucket", "gcra"]
metric = sys.argv[2] if len(sys.argv) > 2 else "ns"
runs, allocs = collections.defaultdict(list), {}
for line in open(sys.argv[1]):
    m = re.match(r"Benchmark(\S+?)(?:-(\d+))?\s+\d+\s+([\d.]+) ns/op\s+(?:([\d.]+) cpu-ns/op\s+)?(\d+) B/op\s+(\d+) allocs/op", line)
    if m:
        value = m[4] if metric == "cpu" else m[3]
        if value is None:
            sys.exit(f"no cpu-ns/op in: {line.strip()}")
        # One goroutine is one goroutine at any GOMAXPROCS; RunParallel's count is GOMAXPROCS.
        name = m[1] if m[1].endswith("/serial") else f"{m[1]}-{m[2] or 1}"
        runs[name].append(float(value))
        allocs[name] = int(m[6])
med = {k: statistics.median(v) for k, v in runs.items()}
print("| keys | goroutines | x/time/rate map (peer) | " + " | ".join(ALGS) + " |")
print("|---|---|---|" + "---|" * len(ALGS))
procs = sorted({int(k.rsplit("-", 1)[1]) for k in med if not k.endswith("/serial")})
for keys in ["hot", "10k", "1M"]:
    for mode in ["serial"] + [f"parallel-{n}" for n in procs]:
        peer = med.get(f"PeerXTimeRateMap/{keys}/{mode}")
        if peer is None:
            continue
        row = [keys, "1" if mode == "serial" else f"RunParallel ({mode.split('-')[1]})", f"{peer:.0f} ns"]
        for a in ALGS:
            k = f"AllowN/{a}/{keys}/{mode}"
            row.append(f"{med[k]:.0f} ns ({med[k] / peer:.2f}×), {allocs[k]} allocs" if k in med else "–")
        print("| " + " | ".join(row) + " |")
