#!/usr/bin/env bash
# Installs redis-server and redis-cli (Debian package redis-server) when they are
# missing, so the Redis tests can start real servers. Needs root for apt-get.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "redis-server is not installed and this script cannot install it (needs root and apt-get)." >&2
  echo "Install the Debian package redis-server (or put redis-server and redis-cli on PATH) and rerun." >&2
  exit 1
fi
echo "installing redis-server (apt-get)..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends redis-server >/dev/null
# The package starts a system-wide server on port 6379; the tests start their own.
(service redis-server stop || systemctl stop redis-server) >/dev/null 2>&1 || true
command -v redis-server >/dev/null
