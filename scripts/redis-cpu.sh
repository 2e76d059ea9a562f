#!/usr/bin/env bash
# redis-cpu.sh: Redis CPU time per decision of the Redis store, for one or more
# builds of Sluice measured in the same run.
#
# Starts a throw-away redis-server on 127.0.0.1 (a free port, or $PORT), or
# with CLUSTER=N a throw-away Redis Cluster of N masters, and, for each round,
# each algorithm and each build (interleaved, so that a busy machine weighs on
# all of them alike), runs
#
#	sluice bench --target TARGET --algorithm ALG \
#	             --concurrency 64 --keys 10000 --duration 5s --json
#
# (limit 1e9/s: every decision admits and writes) and prints the Redis CPU µs
# per decision: the change of INFO cpu's used_cpu_user + used_cpu_sys over the
# run, divided by the decisions made. It also prints the usec_per_call of the
# store's script command over the run (EVALSHA or FCALL, from INFO
# commandstats). On a Cluster both add up every master's figures. CPU time per decision, unlike throughput, hardly depends on
# what else the machine runs. The database and the function library are
# flushed before each run, so each build starts from no keys.
#
# Usage: scripts/redis-cpu.sh [REV...]      (from the repository root)
#   REV: a git revision to build (e.g. HEAD~3 or main), or "." for the working
#   tree (the default). E.g. scripts/redis-cpu.sh main .   compares main with
#   the working tree.
# Env:  ROUNDS (3), DURATION (5s), CONCURRENCY (64), KEYS (10000), PORT,
#       CLUSTER (0: one server; N: a Cluster of N masters, e.g. 3),
#       ALGS ("fixed_window sliding_window token_bucket gcra leaky_bucket"),
#       LIMIT (1000000000), PERIOD (1s), BURST (0: the limit),
#       HOT (0: the share of calls on the one key "hot", as bench --hot),
#       REDIS_CPUS (one server only: run it on those CPUs, e.g. 1, with taskset)
# Output: one CSV line per run (round,build,algorithm,decisions,rps,
# cpu_us_per_decision,command,usec_per_call,calls_per_decision), then the
# medians per build and algorithm.
set -euo pipefail

cd "$(dirname "$0")/.."
. scripts/lib.sh
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONCURRENCY=${CONCURRENCY:-64}
KEYS=${KEYS:-10000}
ALGS=${ALGS:-fixed_window sliding_window token_bucket gcra leaky_bucket}
LIMIT=${LIMIT:-1000000000}
PERIOD=${PERIOD:-1s}
BURST=${BURST:-0}
HOT=${HOT:-0}
CLUSTER=${CLUSTER:-0}
revs=("$@")
[[ ${#revs[@]} -gt 0 ]] || revs=(.)

require redis-cpu.sh redis-server redis-cli

work=$(mktemp -d)
redis_pid=
redis_pids=()
cleanup() {
	local pid
	for pid in $redis_pid "${redis_pids[@]}"; do
		stop_pid "$pid"
	done
	rm -rf "$work"
}
trap cleanup EXIT

# Build each revision's sluice: "." from the working tree, others from a git
# archive of that revision (the repository itself is not touched).
names=()
for i in "${!revs[@]}"; do
	rev=${revs[$i]}
	out="$work/sluice-$i"
	if [[ $rev == . ]]; then
		go build -o "$out" ./cmd/sluice
		names+=("working-tree")
	else
		src="$work/src-$i"
		mkdir -p "$src"
		git archive "$rev" | tar -x -C "$src"
		(cd "$src" && go build -o "$out" ./cmd/sluice)
		names+=("$(git rev-parse --short "$rev")")
	fi
done

if [[ $CLUSTER -gt 0 ]]; then
	start_cluster "$work" "$CLUSTER"
	where="a Cluster of $CLUSTER masters, ports ${PORTS[*]}"
else
	start_redis "$work"
	TARGET="redis://127.0.0.1:$PORT"
	where="port $PORT"
fi

echo "# redis-server $(redis_version), $where; $CONCURRENCY callers, $KEYS keys (hot share $HOT), $DURATION per run, $ROUNDS rounds"
for i in "${!revs[@]}"; do echo "# build $i: ${names[$i]} (${revs[$i]})"; done
echo "round,build,algorithm,decisions,rps,cpu_us_per_decision,command,usec_per_call,calls_per_decision"
results="$work/results.csv"
for round in $(seq "$ROUNDS"); do
	for alg in $ALGS; do
		for i in "${!revs[@]}"; do
			each_node FLUSHALL >/dev/null
			each_node FUNCTION FLUSH >/dev/null
			each_node CONFIG RESETSTAT >/dev/null
			c0=$(redis_cpu)
			json=$(timeout 600 "$work/sluice-$i" bench --target "$TARGET" --algorithm "$alg" \
				--limit "$LIMIT" --period "$PERIOD" --burst "$BURST" --hot "$HOT" \
				--concurrency "$CONCURRENCY" --keys "$KEYS" --duration "$DURATION" --json)
			c1=$(redis_cpu)
			read -r calls usec cmd < <(script_stats)
			line=$(python3 -c '
import json, sys
j = json.loads(sys.argv[1]); c0, c1 = float(sys.argv[2]), float(sys.argv[3]); calls, usec = int(sys.argv[4]), int(sys.argv[5])
d = j["allowed"] + j["denied"]
if j["errors"]:
    print("redis-cpu.sh: %d errors, first: %s" % (j["errors"], j.get("first_error", "")), file=sys.stderr)
print("%d,%.0f,%.2f,%s,%.2f,%.3f" % (d, j["throughput_rps"], (c1 - c0) * 1e6 / max(d, 1), sys.argv[6], usec / max(calls, 1), calls / max(d, 1)))
' "$json" "$c0" "$c1" "$calls" "$usec" "$cmd")
			echo "$round,${names[$i]},$alg,$line" | tee -a "$results"
		done
	done
done

echo "# medians over $ROUNDS rounds: build,algorithm,rps,cpu_us_per_decision,command,usec_per_call,calls_per_decision"
python3 - "$results" <<'EOF'
import csv, statistics, sys
rows = {}
for r in csv.reader(open(sys.argv[1])):
    rows.setdefault((r[1], r[2]), []).append(r)
for (build, alg), rs in rows.items():
    med = lambda k: statistics.median(float(r[k]) for r in rs)
    print("%s,%s,%.0f,%.2f,%s,%.2f,%.3f" % (build, alg, med(4), med(5), rs[-1][6], med(7), med(8)))
EOF
