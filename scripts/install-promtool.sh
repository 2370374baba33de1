#!/usr/bin/env bash
# install-promtool.sh — install promtool (from Debian's `prometheus` package)
# for `make test`'s rule checks. Idempotent: does nothing when promtool is
# already on PATH. Only the Debian package is used.
#
# The package also ships the Prometheus server; a temporary
# /usr/sbin/policy-rc.d stops its postinst from starting it (nothing here
# uses it).
#
# Usage: scripts/install-promtool.sh        (needs root or sudo)
set -euo pipefail

if command -v promtool >/dev/null 2>&1; then
  echo "install-promtool: $(promtool --version 2>&1 | head -1) already installed"
  exit 0
fi

SUDO=""
if [[ "$(id -u)" != 0 ]]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-promtool: need root or sudo for apt-get" >&2; exit 1; }
  SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when they are missing or older than a day.
if [[ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -1)" ]]; then
  $SUDO apt-get update -qq
fi
created_policy=0
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  created_policy=1
fi
rc=0
$SUDO apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 prometheus >/dev/null || rc=$?
if ((created_policy)); then $SUDO rm -f /usr/sbin/policy-rc.d; fi
((rc == 0)) || { echo "install-promtool: apt-get install prometheus failed" >&2; exit "$rc"; }
echo "install-promtool: $(promtool --version 2>&1 | head -1)"
