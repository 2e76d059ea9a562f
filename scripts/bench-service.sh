#!/usr/bin/env bash
# bench-service.sh: `sluice bench` against `sluice serve` over the Envoy RLS
# gRPC API — memory store and Redis — and against the no-op RLS server
# (internal/cmd/noop-rls), the peer, with the same load in the same run.
#
# Everything runs on this machine, on 127.0.0.1: a throw-away redis-server, the
# servers, and the load generator. Rounds are interleaved (each round runs
# every target once) so that drift in a shared machine's speed hits every
# target alike; the table reports medians over rounds and ratios to the peer.
#
# Two load shapes, each with CONC callers (64):
#   uniform  KEYS (10,000) keys chosen at random, limit 1000/s per key: every
#            call is admitted (the common path)
#   hot      every call on one key with the same limit: nearly every call is
#            denied (the path a hot key or an attacker takes)
#
# Usage: scripts/bench-service.sh            (from the repository root)
# Env:   ROUNDS (3), DURATION (10s), CONC (64), KEYS (10000),
#        WORKERS (grpc stream workers for both servers; default GOMAXPROCS,
#        0 for one goroutine per call), TIMEOUT (a fixed store.timeout; default unset: adaptive),
#        OUT (a directory to keep the JSON results in)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONC=${CONC:-64}
KEYS=${KEYS:-10000}
WORKERS=${WORKERS:-$(nproc)}
TIMEOUT=${TIMEOUT:-}

work=$(mktemp -d)
OUT=${OUT:-$work/results}
mkdir -p "$OUT"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
waitport() {
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "bench-service.sh: nothing listens on $1" >&2
	exit 1
}

go build -o "$work/sluice" ./cmd/sluice
go build -o "$work/noop-rls" ./internal/cmd/noop-rls

rport=$(freeport)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
waitport "$rport"

cat >"$work/bench.yaml" <<YAML
domain: bench
descriptors:
  - key: key
    rate_limit:
      unit: second
      requests_per_unit: 1000
YAML
if [ -n "$TIMEOUT" ]; then
	printf 'store:\n  timeout: %s\n' "$TIMEOUT" >"$work/store.yaml"
else
	printf 'store:\n  on_error: local\n' >"$work/store.yaml"
fi

declare -A grpc http
start_sluice() { # name store-url
	local g h
	g=$(freeport) h=$(freeport)
	"$work/sluice" serve --config "$work/bench.yaml" --config "$work/store.yaml" --store "$2" \
		--grpc-addr "127.0.0.1:$g" --http-addr "127.0.0.1:$h" --health-addr "" --grpc-stream-workers "$WORKERS" \
		--log-level warn >"$work/$1.log" 2>&1 &
	pids+=($!)
	waitport "$g"
	grpc[$1]=$g http[$1]=$h
}
p=$(freeport)
"$work/noop-rls" --addr "127.0.0.1:$p" --grpc-stream-workers "$WORKERS" &
pids+=($!)
waitport "$p"
grpc[noop]=$p
start_sluice memory memory://
start_sluice redis "redis://127.0.0.1:$rport"

for round in $(seq "$ROUNDS"); do
	for shape in uniform hot; do
		hot=0
		[[ $shape == hot ]] && hot=1
		for target in noop memory redis; do
			echo "round $round: $target $shape" >&2
			"$work/sluice" bench --target "grpc://127.0.0.1:${grpc[$target]}" --domain bench --descriptor key \
				--concurrency "$CONC" --duration "$DURATION" --keys "$KEYS" --hot "$hot" --json --quiet \
				>"$OUT/$target-$shape-$round.json"
		done
	done
done

# Decisions the fail policy made: a Redis call slower than the timeout is
# answered by on_error instead of Redis, and must be reported.
degraded=$(curl -s "127.0.0.1:${http[redis]}/metrics" | awk '/^sluice_store_degraded_decisions_total/ {s += $2} END {print s + 0}')
failures=$(curl -s "127.0.0.1:${http[redis]}/metrics" | awk '/^sluice_store_errors_total/ {s += $2} END {print s + 0}')

python3 - "$OUT" "$ROUNDS" "$degraded" "${failures:-0}" <<'PY'
import json, statistics, sys
out, rounds, degraded, failures = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def load(t, s):
    return [json.load(open(f"{out}/{t}-{s}-{r}.json")) for r in range(1, rounds + 1)]
print("| load | server | req/s | vs no-op | p50 | p99 | p99 vs no-op | allowed | denied | errors |")
print("|---|---|---|---|---|---|---|---|---|---|")
for shape in ["uniform", "hot"]:
    peer = load("noop", shape)
    prps = statistics.median(r["throughput_rps"] for r in peer)
    pp99 = statistics.median(r["p99_ms"] for r in peer)
    for t in ["noop", "memory", "redis"]:
        rs = load(t, shape)
        rps = statistics.median(r["throughput_rps"] for r in rs)
        p50 = statistics.median(r["p50_ms"] for r in rs)
        p99 = statistics.median(r["p99_ms"] for r in rs)
        name = {"noop": "no-op RLS (peer)", "memory": "sluice serve, memory", "redis": "sluice serve, Redis"}[t]
        print(f"| {shape} | {name} | {rps/1000:.1f}k | {rps/prps:.2f} | {p50:.2f} ms | {p99:.2f} ms | {p99/pp99:.2f} | "
              f"{sum(r['allowed'] for r in rs)} | {sum(r['denied'] for r in rs)} | {sum(r['errors'] for r in rs)} |")
print(f"\nRedis decisions answered by the fail policy (store.timeout exceeded): {degraded}; store failures: {failures}")
PY
