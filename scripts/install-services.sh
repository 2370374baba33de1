#!/usr/bin/env bash
# install-services.sh — install, when missing, the servers that the tests and
# benchmarks start through internal/testenv (each on free loopback ports under
# its own temporary directory; nothing here starts a server):
#   redis-server, redis-cli, redis-benchmark          apt: redis-server
#   mariadbd, mariadb-install-db                       apt: mariadb-server
#   mariadb, mariadb-admin, mariadb-slap               apt: mariadb-client
#   rnacos 0.8.8 (r-nacos)                             cargo install rnacos --version 0.8.8 --locked
# Quiet and quick when everything is there; `make test` runs it.
#
# During apt-get install a temporary /usr/sbin/policy-rc.d keeps the packages'
# postinst from starting the system instances (6379 / 3306), which nothing
# uses. Concurrent runs (other checkouts) wait for each other on a lock, and
# an install of rnacos already in progress elsewhere is waited for rather than
# compiled twice on a small machine.
set -euo pipefail

export PATH="$HOME/.cargo/bin:$PATH"
RNACOS_VERSION=0.8.8
LOCK="${TMPDIR:-/tmp}/payserver-install-services.lock"
LOG="$(mktemp "${TMPDIR:-/tmp}/payserver-install-services.XXXXXX.log")"
trap 'rm -f "$LOG"' EXIT

err() { echo "install-services.sh: $*" >&2; }
die() { # die MESSAGE: the message and the end of the install log
  err "$1"
  if [[ -s "$LOG" ]]; then
    echo "---- last 30 lines of the install log ----" >&2
    tail -n 30 "$LOG" >&2
  fi
  exit 1
}

missing_apt_packages() { # prints the apt packages whose binaries are missing
  local b
  for b in redis-server redis-cli redis-benchmark; do
    command -v "$b" >/dev/null 2>&1 || { echo redis-server; break; }
  done
  for b in mariadbd mariadb-install-db; do
    command -v "$b" >/dev/null 2>&1 || { echo mariadb-server; break; }
  done
  for b in mariadb mariadb-admin mariadb-slap; do
    command -v "$b" >/dev/null 2>&1 || { echo mariadb-client; break; }
  done
}

rnacos_installed() { command -v rnacos >/dev/null 2>&1; }

apt_install() { # apt_install PACKAGES...
  local sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null 2>&1 || die "apt-get install $* needs root (or sudo)"
    sudo=(sudo)
  fi
  err "apt-get install $*"
  "${sudo[@]}" apt-get update -qq >"$LOG" 2>&1 || die "apt-get update failed"
  local created_policy=0 rc=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee /usr/sbin/policy-rc.d >/dev/null
    "${sudo[@]}" chmod +x /usr/sbin/policy-rc.d
    created_policy=1
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >>"$LOG" 2>&1 || rc=$?
  ((created_policy)) && "${sudo[@]}" rm -f /usr/sbin/policy-rc.d
  ((rc == 0)) || die "apt-get install $* failed"
}

install_rnacos() {
  # An install started by someone else (another checkout, by hand): wait for it.
  local waited=0
  while ! rnacos_installed && pgrep -f 'cargo install rnacos' >/dev/null 2>&1; do
    ((waited == 0)) && err "waiting for a running 'cargo install rnacos' to finish"
    sleep 5
    waited=$((waited + 5))
    ((waited <= 3600)) || die "timed out waiting for cargo install rnacos"
  done
  rnacos_installed && return 0
  command -v cargo >/dev/null 2>&1 || die "cargo not found (needed for 'cargo install rnacos')"
  err "cargo install rnacos --version $RNACOS_VERSION --locked (takes several minutes)"
  cargo install rnacos --version "$RNACOS_VERSION" --locked >"$LOG" 2>&1 || die "cargo install rnacos failed"
  rnacos_installed || die "rnacos not found after cargo install"
}

mapfile -t packages < <(missing_apt_packages)
if ((${#packages[@]} == 0)) && rnacos_installed; then
  exit 0
fi
exec 9>"$LOCK"
flock -w 3600 9 || die "timed out waiting for $LOCK"
mapfile -t packages < <(missing_apt_packages) # another run may have installed them meanwhile
((${#packages[@]} == 0)) || apt_install "${packages[@]}"
rnacos_installed || install_rnacos
