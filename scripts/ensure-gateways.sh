#!/usr/bin/env bash
# Installs caddy and nginx (Debian packages) when they are missing, for the
# forward-auth tests, which run both in front of a test upstream. Needs root
# for apt-get.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# Debian installs nginx in /usr/sbin, which is on root's PATH only.
PATH=$PATH:/usr/sbin
missing=()
command -v caddy >/dev/null 2>&1 || missing+=(caddy)
command -v nginx >/dev/null 2>&1 || missing+=(nginx)
[ ${#missing[@]} -eq 0 ] && exit 0
if ! can_apt_install; then
  echo "${missing[*]} not installed and this script cannot install them (needs root and apt-get)." >&2
  echo "Install the Debian packages ${missing[*]} (or put the binaries on PATH) and rerun." >&2
  exit 1
fi
echo "installing ${missing[*]} (apt-get)..." >&2
apt_install "${missing[@]}"
# The packages start system-wide servers (ports 80 and 2019); the tests start their own.
stop_services "${missing[@]}"
command -v caddy >/dev/null && command -v nginx >/dev/null
