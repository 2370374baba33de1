#!/usr/bin/env bash
# install-wrk.sh - installs Debian's wrk (the HTTP load generator of the
# end-to-end benchmarks) when it is missing.
set -euo pipefail
command -v wrk >/dev/null 2>&1 && exit 0
echo "installing wrk (apt-get install -y wrk)" >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null 2>&1 ||
  { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; } ||
  { echo "install-wrk: FAIL: apt-get install wrk failed" >&2; exit 1; }
