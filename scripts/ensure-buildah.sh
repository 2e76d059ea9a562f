#!/usr/bin/env bash
# Installs buildah (Debian package buildah) when it is missing, so `make image`
# can build the container image without a daemon. Needs root for apt-get.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ensure_tool buildah "" "" buildah
