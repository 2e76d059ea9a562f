#!/usr/bin/env bash
# Installs promtool (Debian package prometheus) when it is missing, for the
# alert rule tests of `make deploy-test`. Needs root for apt-get.
set -euo pipefail
command -v promtool >/dev/null 2>&1 && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "promtool is not installed and this script cannot install it (needs root and apt-get)." >&2
  exit 1
fi
echo "installing prometheus for promtool (apt-get)..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends prometheus >/dev/null
# The package starts a system-wide server on port 9090; the tests need only promtool.
(service prometheus stop || systemctl stop prometheus) >/dev/null 2>&1 || true
command -v promtool >/dev/null
