#!/usr/bin/env bash
# Installs redis-server and redis-cli (Debian package redis-server) when they are
# missing, so the Redis tests can start real servers. Needs root for apt-get.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# The package starts a system-wide server on port 6379; the tests start their own.
ensure_tool redis-server redis-server \
	"Install the Debian package redis-server (or put redis-server and redis-cli on PATH) and rerun." \
	redis-server redis-cli
