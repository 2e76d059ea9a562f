#!/usr/bin/env bash
# Installs buildah (Debian package buildah) when it is missing, so `make image`
# can build the container image without a daemon. Needs root for apt-get.
set -euo pipefail
command -v buildah >/dev/null 2>&1 && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "buildah is not installed and this script cannot install it (needs root and apt-get)." >&2
  exit 1
fi
echo "installing buildah (apt-get)..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends buildah >/dev/null
command -v buildah >/dev/null
