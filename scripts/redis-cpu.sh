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
#       REDIS_CPUS (one server only: run it on those CPUs, e.g. 1, with taskset),
#       FLOOR (0; 1: also, each round, the Redis CPU of the bare commands a
#       decision is made of, sent by redis-benchmark on the same server with
#       CONCURRENCY clients, -P 32 and KEYS random keys, FLOOR_REQUESTS
#       (1000000) each: GET; SET of a 17-byte value with PX 1, a key
#       written and soon expired, as every key of this load is; SET with a
#       PXAT far ahead, a live key overwritten; MGET of 32 keys, per key
#       (the database is flushed before each, so GET and MGET miss).
#       The floor under a decision that reads and writes a string key.
#       One server only)
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
FLOOR=${FLOOR:-0}
FLOOR_REQUESTS=${FLOOR_REQUESTS:-1000000}
revs=("$@")
[[ ${#revs[@]} -gt 0 ]] || revs=(.)

require redis-cpu.sh redis-server redis-cli
if [[ $FLOOR == 1 ]]; then
	require redis-cpu.sh redis-benchmark
	[[ $CLUSTER == 0 ]] || { echo "redis-cpu.sh: FLOOR needs one server (CLUSTER=0)" >&2; exit 2; }
fi

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

# floor_round ROUND: one run of each bare command (see FLOOR), as CSV lines
# of build "floor", the command as the algorithm, and per command (per key
# for the MGET) what a decision's line gives per decision.
floor_round() {
	local mget=() name cmd c0 c1 per line
	for _ in $(seq 32); do mget+=("k:__rand_int__"); done
	for name in GET SET-PX-1 SET-PXAT-far MGET-32; do
		case $name in
		GET) cmd=(GET k:__rand_int__) per=1 ;;
		SET-PX-1) cmd=(SET k:__rand_int__ 0123456789abcdef0 PX 1) per=1 ;;
		SET-PXAT-far) cmd=(SET k:__rand_int__ 0123456789abcdef0 PXAT 99999999999999) per=1 ;;
		MGET-32) cmd=(MGET "${mget[@]}") per=32 ;;
		esac
		cli FLUSHALL >/dev/null
		cli CONFIG RESETSTAT >/dev/null
		c0=$(redis_cpu)
		line=$(timeout 600 redis-benchmark -h 127.0.0.1 -p "$PORT" -c "$CONCURRENCY" -P 32 -n "$FLOOR_REQUESTS" \
			-r "$KEYS" --csv "${cmd[@]}" | tail -1)
		c1=$(redis_cpu)
		read -r calls usec < <(cli INFO commandstats | tr -d '\r' | awk -F'[:,=]' -v c="cmdstat_${cmd[0],,}" '
			$1 == c { for (i = 2; i < NF; i += 2) { if ($i == "calls") n = $(i+1); if ($i == "usec") u = $(i+1) } }
			END { printf "%d %d\n", n, u }')
		python3 -c '
import sys
line, c0, c1, calls, usec, per, n = sys.argv[1:8]
rps = float(line.split(",")[1].strip("\""))
ops = int(n) * int(per)
print("%d,%.0f,%.2f,%s,%.2f,%.3f" % (ops, rps * int(per), (float(c1) - float(c0)) * 1e6 / ops, sys.argv[8], int(usec) / max(int(calls), 1) / int(per), int(calls) / ops))
' "$line" "$c0" "$c1" "$calls" "$usec" "$per" "$FLOOR_REQUESTS" "${cmd[0]}" | sed "s/^/$1,floor,$name,/" | tee -a "$results"
	done
}
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
	if [[ $FLOOR == 1 ]]; then
		floor_round "$round"
	fi
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
