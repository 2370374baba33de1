#!/usr/bin/env bash
# install-chromium.sh — install Debian's headless-capable Chromium (and its
# driver) for the dashboard end-to-end test. Idempotent: does nothing when
# `chromium` is already on PATH. Only Debian packages are used; no browser
# build is downloaded from anywhere else.
#
# Usage: scripts/install-chromium.sh        (needs root or sudo)
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  echo "install-chromium: $(chromium --version 2>/dev/null || echo chromium) already installed"
  exit 0
fi

SUDO=""
if [[ "$(id -u)" != 0 ]]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-chromium: need root or sudo for apt-get" >&2; exit 1; }
  SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when they are missing or older than a day.
if [[ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -1)" ]]; then
  $SUDO apt-get update -qq
fi
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core >/dev/null
echo "install-chromium: $(chromium --version 2>/dev/null || echo 'chromium installed')"
