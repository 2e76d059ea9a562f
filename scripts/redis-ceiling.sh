#!/usr/bin/env bash
# redis-ceiling.sh: the Redis-side ceiling of Sluice's own single-decision GCRA
# script and function. Starts a throw-away redis-server on 127.0.0.1 (a free
# port, or $PORT), loads the exact script and function library the Redis store
# runs for a GCRA decision (written by the TestPrintGCRAScript test, so this
# never drifts from redisstore), and runs redis-benchmark with EVALSHA (the
# fall-back where Functions are unavailable), then FCALL (what the store sends
# on Redis 7+), with the same KEYS/ARGV shape the store sends (key
# sluice:{bench:user:N}:gc over 10,000 keys; ARGV '' = server TIME, 'w', P, L,
# C, T, n for 1,000,000/s), each once without pipelining and once with -P 16.
#
# Usage: scripts/redis-ceiling.sh            (from the repository root)
# Env:   PORT (default: a free port), CLIENTS (50), REQUESTS (200000),
#        KEYS (10000), PIPELINE (16)
# Output: one CSV line per mode (P1, P16: EVALSHA; FCALL-P1, FCALL-P16):
# mode,rps,avg_ms,min_ms,p50_ms,p95_ms,p99_ms,max_ms
set -euo pipefail

cd "$(dirname "$0")/.."
. scripts/lib.sh
CLIENTS=${CLIENTS:-50}
REQUESTS=${REQUESTS:-200000}
KEYS=${KEYS:-10000}
PIPELINE=${PIPELINE:-16}

require redis-ceiling.sh redis-server redis-cli redis-benchmark

work=$(mktemp -d)
redis_pid=
cleanup() {
	if [[ -n $redis_pid ]]; then
		stop_pid "$redis_pid"
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# The script, its SHA-1 and the ARGV of one decision, as the store builds them.
SLUICE_SCRIPT_DIR=$work timeout 300 go test -count=1 -run '^TestPrintGCRAScript$' ./redisstore/ >/dev/null
sha=$(<"$work/sha1")
mapfile -t args <"$work/args"
key=$(<"$work/key")
key=${key/\{bench:k\}/\{bench:user:__rand_int__\}} # sluice:{bench:user:__rand_int__}:gc

start_redis "$work"
loaded=$(cli -x SCRIPT LOAD <"$work/script.lua")
if [[ $loaded != "$sha" ]]; then
	echo "redis-ceiling.sh: SCRIPT LOAD returned $loaded, want $sha" >&2
	exit 1
fi
fn=$(<"$work/function")
cli -x FUNCTION LOAD REPLACE <"$work/library.lua" >/dev/null
# One call of each by hand: each must admit, i.e. take the real write path.
# The reply is packed doubles, the first 1.0 (admitted): 00 00 00 00 00 00 f0 3f.
for call in "EVALSHA $sha" "FCALL $fn"; do
	allowed=$(cli $call 1 "${key/__rand_int__/0}" "${args[@]}" | head -c 8 | od -An -tx1 | tr -d ' \n')
	if [[ $allowed != 000000000000f03f ]]; then
		echo "redis-ceiling.sh: $call did not admit (reply starts with $allowed)" >&2
		exit 1
	fi
done

echo "# redis-server $(redis_version), port $PORT, $CLIENTS clients, $REQUESTS requests, $KEYS keys"
echo "# EVALSHA $sha 1 $key$(printf " '%s'" "${args[@]}")"
echo "# FCALL $fn 1 $key$(printf " '%s'" "${args[@]}")"
echo "mode,rps,avg_ms,min_ms,p50_ms,p95_ms,p99_ms,max_ms"
for call in "EVALSHA $sha" "FCALL $fn"; do
	label=
	[[ $call == FCALL* ]] && label=FCALL-
	for p in 1 "$PIPELINE"; do
		line=$(timeout 300 redis-benchmark -h 127.0.0.1 -p "$PORT" -c "$CLIENTS" -n "$REQUESTS" -r "$KEYS" -P "$p" --csv \
			$call 1 "$key" "${args[@]}" | tail -1)
		# "EVALSHA ...","rps","avg",...: keep the numbers.
		nums=$(sed -E 's/^"[^"]*",//; s/"//g' <<<"$line")
		echo "${label}P$p,$nums"
	done
done
echo "# keys written: $(cli DBSIZE)"
