#!/usr/bin/env bash
# lease-nodes.sh: two `sluice serve` nodes sharing one Redis, with and without
# leases, against two memory-store nodes, in the same run.
#
# Starts a throw-away redis-server on 127.0.0.1 and, for each round, each load
# (hot: every call on one key; keys: 10,000 keys, uniform; zipf: 10,000 keys,
# Zipf(1.1): the first takes about 15% of the calls, the first ten half) and
# each variant
#
#	lease    two serve nodes on Redis with store.lease: {} (the defaults)
#	redis    two serve nodes on Redis, every decision a Redis call
#	memory   two serve nodes, each on its own memory store (no sharing)
#	base     as lease, built from the git revision BASE (before and after in
#	         one run: VARIANTS="base lease redis memory" BASE=main)
#	base-redis  as redis, built from BASE
#
# (interleaved, each round starting with the next variant, so a busy machine
# weighs on all alike) starts the two nodes and
# runs, against both at once,
#
#	sluice bench --target http://NODE --policy bench --concurrency 64 \
#	             --keys 10000 [--hot 1 | --keys-dist zipf] --duration 10s --json
#
# after, with WARMUP set, the same load for that long, not measured: a lease
# node's first reservations of a key follow no rate yet (one unit, then one
# TTL of the measured rate), and at 10,000 keys they are a fifth of a cold
# 10-second run's decisions.
#
# The policy is gcra with a limit of 1e9/s, so every decision admits and
# the cost of deciding is what is measured (TestLeaseNodesBound checks the
# bound at a limit that denies). It prints each node's throughput, and the
# Redis CPU µs per decision (the change of INFO cpu's used_cpu_user +
# used_cpu_sys over the run, divided by the decisions of both nodes, as
# scripts/redis-cpu.sh measures it) with the script calls per decision.
#
# Usage: scripts/lease-nodes.sh              (from the repository root)
# Env:  ROUNDS (3), DURATION (10s), CONCURRENCY (64 per node), KEYS (10000),
#       LIMIT (1000000000), LOADS ("hot keys zipf"), VARIANTS ("lease redis memory"),
#       WARMUP (0s: none), BASE (the revision the base variant is built from),
#       STATS (1: after each run, print to stderr every command Redis ran in
#       it, with its calls and µs, from INFO commandstats; a script's own
#       GET, SET, TIME count there too),
#       REDIS_CPUS (e.g. 1: run redis-server on those CPUs only, with taskset;
#       start the script itself under taskset -c 0 to keep the nodes and the
#       load off them: Redis' CPU per decision then shifts less with what the
#       nodes spend)
# Output: one CSV line per run (round,load,variant,rps_node0,rps_node1,
# decisions,errors,cpu_us_per_decision,calls_per_decision,
# node0_cpu_us_per_request,node1_cpu_us_per_request: each serve process's
# CPU over the run, from /proc, divided by the requests it served — steadier
# than requests per second on a busy machine), then the medians.
set -euo pipefail

cd "$(dirname "$0")/.."
. scripts/lib.sh
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONCURRENCY=${CONCURRENCY:-64}
KEYS=${KEYS:-10000}
LIMIT=${LIMIT:-1000000000}
LOADS=${LOADS:-hot keys zipf}
VARIANTS=${VARIANTS:-lease redis memory}
WARMUP=${WARMUP:-0s}
BASE=${BASE:-}
STATS=${STATS:-0}

require lease-nodes.sh redis-server redis-cli curl python3

work=$(mktemp -d)
pids=()
stop() {
	for p in "${pids[@]}"; do
		stop_pid "$p"
	done
	pids=()
}
redis_pid=
cleanup() {
	stop
	if [[ -n $redis_pid ]]; then
		stop_pid "$redis_pid"
	fi
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/sluice" ./cmd/sluice
if [[ " $VARIANTS " == *" base"* ]]; then
	if [[ -z $BASE ]]; then
		echo "lease-nodes.sh: the base variant needs BASE (a git revision)" >&2
		exit 1
	fi
	mkdir "$work/base"
	git archive "$BASE" | tar -x -C "$work/base"
	(cd "$work/base" && go build -o "$work/sluice-base" ./cmd/sluice)
fi

# Always a free port: PORT is not one of this script's settings.
PORT=
start_redis "$work"

policy="policies:
  - {name: bench, algorithm: gcra, limit: $LIMIT, period: 1s}"
printf 'store:\n  url: redis://127.0.0.1:%s\n  lease: {}\n%s\n' "$PORT" "$policy" >"$work/lease.yaml"
printf 'store:\n  url: redis://127.0.0.1:%s\n%s\n' "$PORT" "$policy" >"$work/redis.yaml"
printf 'store:\n  url: memory://\n%s\n' "$policy" >"$work/memory.yaml"

# start VARIANT: two serve nodes; their HTTP ports in $nodes.
start() {
	nodes=()
	local bin=$work/sluice config=$1
	case $1 in
	base) bin=$work/sluice-base config=lease ;;
	base-redis) bin=$work/sluice-base config=redis ;;
	esac
	for n in 0 1; do
		local http
		http=$(freeport)
		"$bin" serve --config "$work/$config.yaml" --http-addr "127.0.0.1:$http" --grpc-addr "" --health-addr "" \
			--drain 0s --log-level warn 2>>"$work/serve.log" &
		pids+=($!)
		nodes+=("$http")
	done
	for http in "${nodes[@]}"; do
		for _ in $(seq 200); do
			curl -sf "127.0.0.1:$http/readyz/store" >/dev/null 2>&1 && break
			sleep 0.05
		done
	done
}

# node_cpu: the CPU µs (user + system) each serve node has used so far.
node_cpu() {
	local tick p
	tick=$(getconf CLK_TCK)
	for p in "${pids[@]}"; do
		awk -v t="$tick" '{ printf "%.0f ", ($14 + $15) * 1e6 / t }' "/proc/$p/stat"
	done
}

# load DURATION NAME: sluice bench against both nodes at once, for DURATION,
# into $work/NAME-0.json and NAME-1.json.
load() {
	local benches=()
	for n in 0 1; do
		timeout 600 "$work/sluice" bench --target "http://127.0.0.1:${nodes[$n]}" --policy bench \
			--concurrency "$CONCURRENCY" --duration "$1" "${args[@]}" --json >"$work/$2-$n.json" &
		benches+=($!)
	done
	wait "${benches[@]}"
}

echo "# redis-server $(redis_version), port $PORT; two nodes of $CONCURRENCY callers each, $DURATION per run after a warm-up of $WARMUP, $ROUNDS rounds"
echo "round,load,variant,rps_node0,rps_node1,decisions,errors,cpu_us_per_decision,calls_per_decision,node0_cpu_us_per_request,node1_cpu_us_per_request"
results="$work/results.csv"
for round in $(seq "$ROUNDS"); do
	for load in $LOADS; do
		args=(--keys "$KEYS")
		[[ $load == hot ]] && args+=(--hot 1)
		[[ $load == zipf ]] && args+=(--keys-dist zipf)
		# Each round starts with the next variant, so none always runs first
		# (after another load's run) or last.
		read -ra vs <<<"$VARIANTS"
		for ((i = 0; i < ${#vs[@]}; i++)); do
			variant=${vs[(i + round - 1) % ${#vs[@]}]}
			cli FLUSHALL >/dev/null
			start "$variant"
			if [[ $WARMUP != 0s && $WARMUP != 0 ]]; then
				load "$WARMUP" warmup
			fi
			cli CONFIG RESETSTAT >/dev/null
			c0=$(redis_cpu)
			n0=$(node_cpu)
			load "$DURATION" bench
			n1=$(node_cpu)
			c1=$(redis_cpu)
			read -r k _ _ < <(script_stats)
			if [[ $STATS == 1 ]]; then
				cli INFO commandstats | tr -d '\r' | awk -F'[:,=]' -v run="$round,$load,$variant" '
					/^cmdstat_/ { sub(/^cmdstat_/, "", $1); printf "# %s: %s calls=%s usec=%s\n", run, $1, $3, $5 }' >&2
			fi
			stop
			line=$(python3 -c '
import json, sys
w = sys.argv[1]
j = [json.load(open("%s/bench-%d.json" % (w, n))) for n in (0, 1)]
c0, c1, calls = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
n0, n1 = [float(v) for v in sys.argv[5].split()], [float(v) for v in sys.argv[6].split()]
node_us = [(n1[i] - n0[i]) / max(1, j[i]["allowed"] + j[i]["denied"]) for i in (0, 1)]
d = sum(x["allowed"] + x["denied"] for x in j)
e = sum(x["errors"] for x in j)
for x in j:
    if x["errors"]:
        print("lease-nodes.sh: %d errors, first: %s" % (x["errors"], x.get("first_error", "")), file=sys.stderr)
print("%.0f,%.0f,%d,%d,%.3f,%.4f,%.1f,%.1f" % (j[0]["throughput_rps"], j[1]["throughput_rps"], d, e, (c1 - c0) * 1e6 / max(d, 1), calls / max(d, 1), node_us[0], node_us[1]))
' "$work" "$c0" "$c1" "$k" "$n0" "$n1")
			echo "$round,$load,$variant,$line" | tee -a "$results"
		done
	done
done

echo "# medians over $ROUNDS rounds: load,variant,rps_node0,rps_node1,cpu_us_per_decision,calls_per_decision,node0_cpu_us_per_request,node1_cpu_us_per_request; then each node's throughput and CPU per request against memory's, and Redis CPU per decision without leases over with"
python3 - "$results" <<'EOF'
import csv, statistics, sys
rows, byround = {}, {}
for r in csv.reader(open(sys.argv[1])):
    rows.setdefault((r[1], r[2]), []).append(r)
    byround[(r[0], r[1], r[2])] = r
med = {}
for (load, variant), rs in rows.items():
    m = [statistics.median(float(r[i]) for r in rs) for i in (3, 4, 7, 8, 9, 10)]
    med[(load, variant)] = m
    print("%s,%s,%.0f,%.0f,%.3f,%.4f,%.1f,%.1f" % (load, variant, *m))
# Leases on ÷ off, taken within each round (the machine's load weighs on
# both alike), then the median over the rounds.
def ratios(load, on, off):
    cpu, rps = [], []
    for rnd in sorted({k[0] for k in byround}):
        a, b = byround.get((rnd, load, on)), byround.get((rnd, load, off))
        if a and b and float(b[7]) > 0:
            cpu.append(float(a[7]) / float(b[7]))
            rps.append((float(a[3]) + float(a[4])) / max(1, float(b[3]) + float(b[4])))
    return (statistics.median(cpu), statistics.median(rps), min(cpu), max(cpu)) if cpu else None
for load in sorted({l for l, _ in med}):
    memory = med.get((load, "memory"))
    for name, off in (("base", "base-redis"), ("lease", "redis")):
        lease, redis = med.get((load, name)), med.get((load, off))
        if lease and memory:
            mem = (memory[0] + memory[1]) / 2
            print("%s: %s nodes at %.0f%% and %.0f%% of a memory node's throughput" % (load, name, 100 * lease[0] / mem, 100 * lease[1] / mem))
            memcpu = (memory[4] + memory[5]) / 2
            print("%s: %s nodes use %.2f× and %.2f× a memory node's CPU per request" % (load, name, lease[4] / memcpu, lease[5] / memcpu))
        if lease and redis and lease[2] > 0:
            print("%s: Redis CPU per decision %.1f× lower with %s (%.3f vs %.3f µs)" % (load, redis[2] / lease[2], name, lease[2], redis[2]))
        r = ratios(load, name, off)
        if r:
            print("%s: %s on ÷ off (%s), medians of the rounds' ratios: Redis CPU per decision %.2f (%.2f–%.2f), decisions/s %.2f" % (load, name, off, r[0], r[2], r[3], r[1]))
EOF
