# lib.sh: what the scripts share, written once. Source it:
#   . "$(dirname "$0")/lib.sh"
# Everything here runs under the caller's `set -euo pipefail`.

# --- installing tools (scripts/ensure-*.sh) ---

# can_apt_install: true when this process may install Debian packages.
can_apt_install() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

# apt_install PACKAGE...: installs the packages quietly.
apt_install() {
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# stop_services SERVICE...: stops the system-wide servers a package starts;
# the tests start their own.
stop_services() {
	local s
	for s in "$@"; do
		(service "$s" stop || systemctl stop "$s") >/dev/null 2>&1 || true
	done
}

# ensure_tool PACKAGE SERVICE HINT COMMAND...: exits at once when every
# COMMAND is on PATH; else installs the Debian PACKAGE (needs root and
# apt-get), stops SERVICE ("" for none) and checks the first COMMAND. HINT,
# when not empty, is a second line for the case it cannot install.
ensure_tool() {
	local pkg=$1 service=$2 hint=$3 c missing=
	shift 3
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || missing=1
	done
	[ -z "$missing" ] && exit 0
	if ! can_apt_install; then
		echo "$1 is not installed and this script cannot install it (needs root and apt-get)." >&2
		[ -z "$hint" ] || echo "$hint" >&2
		exit 1
	fi
	if [ "$pkg" = "$1" ]; then
		echo "installing $pkg (apt-get)..." >&2
	else
		echo "installing $pkg for $1 (apt-get)..." >&2
	fi
	apt_install "$pkg"
	[ -z "$service" ] || stop_services "$service"
	command -v "$1" >/dev/null
}

# --- measuring against a throw-away Redis (redis-cpu, redis-ceiling, lease-nodes) ---

# require SCRIPT BIN...: exits naming the first BIN not on PATH.
require() {
	local script=$1 bin hint
	shift
	for bin in "$@"; do
		hint=
		[[ $bin == redis-* ]] && hint=" (scripts/ensure-redis.sh installs it)"
		command -v "$bin" >/dev/null || { echo "$script: $bin not found$hint" >&2; exit 1; }
	done
}

# freeport: a free TCP port on 127.0.0.1.
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }

# stop_pid PID: ends a process this script started and waits for it.
stop_pid() {
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# start_redis DIR: a redis-server without persistence on 127.0.0.1:$PORT
# (a free port when PORT is unset), its files in DIR; sets PORT and
# redis_pid and returns once it answers PING. With REDIS_CPUS set (a taskset
# list, e.g. 1) the server runs on those CPUs only.
start_redis() {
	[[ -n ${PORT:-} ]] || PORT=$(freeport)
	${REDIS_CPUS:+taskset -c "$REDIS_CPUS"} redis-server --bind 127.0.0.1 --port "$PORT" --dir "$1" --save '' --appendonly no \
		--protected-mode no --daemonize no --logfile "$1/redis.log" &
	redis_pid=$!
	for _ in $(seq 100); do
		cli PING >/dev/null 2>&1 && break
		sleep 0.05
	done
}

# start_cluster DIR N: a Redis Cluster of N masters (no replicas, no
# persistence) on 127.0.0.1, each node's files in DIR/node-PORT; sets PORTS
# (the nodes' ports), PORT (the first), TARGET (a store URL naming every node)
# and redis_pids, and returns once every node reports cluster_state:ok. The
# ports lie below 55535 so that each bus port (port+10000) is a valid port;
# they are picked below the ephemeral range, so no client socket holds one.
start_cluster() {
	local dir=$1 n=$2 p i addrs=()
	PORTS=()
	redis_pids=()
	read -r -a PORTS < <(python3 - "$n" <<'PY'
import random, socket, sys
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
ports = []
while len(ports) < int(sys.argv[1]):
    p = random.randrange(12000, 22000)
    if p not in ports and p + 10000 not in ports and free(p) and free(p + 10000):
        ports.append(p)
print(" ".join(map(str, ports)))
PY
	)
	for p in "${PORTS[@]}"; do
		mkdir -p "$dir/node-$p"
		redis-server --bind 127.0.0.1 --port "$p" --dir "$dir/node-$p" --save '' --appendonly no \
			--protected-mode no --daemonize no --logfile "$dir/node-$p/redis.log" \
			--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000 &
		redis_pids+=($!)
		addrs+=("127.0.0.1:$p")
	done
	for p in "${PORTS[@]}"; do
		for _ in $(seq 100); do
			cli_at "$p" PING >/dev/null 2>&1 && break
			sleep 0.05
		done
	done
	timeout 60 redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$dir/create.log"
	for p in "${PORTS[@]}"; do
		for _ in $(seq 200); do
			cli_at "$p" CLUSTER INFO | grep -q '^cluster_state:ok' && break
			sleep 0.05
		done
	done
	PORT=${PORTS[0]}
	TARGET="redis://${addrs[0]}"
	for i in "${!addrs[@]}"; do
		[[ $i == 0 ]] || { [[ $i == 1 ]] && TARGET+="?addr=${addrs[$i]}" || TARGET+="&addr=${addrs[$i]}"; }
	done
}

# cli ARG...: redis-cli against that server.
cli() { cli_at "$PORT" "$@"; }

# cli_at PORT ARG...: redis-cli against the server on PORT.
cli_at() {
	local p=$1
	shift
	timeout 10 redis-cli -h 127.0.0.1 -p "$p" "$@"
}

# each_node ARG...: redis-cli against every server: each of PORTS, or PORT.
each_node() {
	local p
	for p in "${PORTS[@]:-$PORT}"; do
		cli_at "$p" "$@"
	done
}

# redis_version: "v=X.Y.Z" of the redis-server on PATH.
redis_version() { redis-server --version | grep -o 'v=[^ ]*'; }

# redis_cpu: the user+sys CPU seconds so far of every server (each_node).
redis_cpu() { each_node INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.6f\n", s }'; }

# script_stats: "CALLS USEC COMMAND" of EVALSHA, EVAL and FCALL together, on
# every server (each_node), since the last CONFIG RESETSTAT; COMMAND is FCALL
# when any FCALL ran, else EVALSHA (a build uses one of them).
script_stats() {
	each_node INFO commandstats | tr -d '\r' | awk -F'[:,=]' '
		/^cmdstat_(evalsha|fcall|eval):/ { for (i = 2; i < NF; i += 2) { if ($i == "calls") c += $(i+1); if ($i == "usec") u += $(i+1) } }
		/^cmdstat_fcall:/ { f = 1 }
		END { printf "%d %d %s\n", c, u, (f ? "FCALL" : "EVALSHA") }'
}
