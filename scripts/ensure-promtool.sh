#!/usr/bin/env bash
# Installs promtool (Debian package prometheus) when it is missing, for the
# alert rule tests of `make deploy-test`. Needs root for apt-get.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# The package starts a system-wide server on port 9090; the tests need only promtool.
ensure_tool prometheus prometheus "" promtool
