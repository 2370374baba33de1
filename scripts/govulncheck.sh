#!/usr/bin/env bash
# govulncheck.sh — checks payserver's dependencies (and the Go standard
# library) for known vulnerabilities that its code can reach, with
# golang.org/x/vuln/cmd/govulncheck.
#
# Usage: scripts/govulncheck.sh [govulncheck flags; default ./...]
#
# Installs govulncheck with `go install` when missing (latest, falling back to
# the newest release known to build here if latest cannot be fetched through
# the module proxy). govulncheck reads the Go vulnerability database from
# https://vuln.go.dev, or from GOVULNDB (a URL or file:///path of a local
# copy). Exits non-zero when a reachable vulnerability is found.
#
# When the database cannot be reached (a machine whose network reaches the
# package registries only), it says so and exits 0, unless
# GOVULNCHECK_REQUIRED=1, where that is a failure too.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO="${GO:-go}"
GOBIN_DIR="$("$GO" env GOBIN)"
[[ -n "$GOBIN_DIR" ]] || GOBIN_DIR="$("$GO" env GOPATH)/bin"
GOVULNCHECK="$GOBIN_DIR/govulncheck"
FALLBACK_VERSION="${GOVULNCHECK_FALLBACK_VERSION:-v1.8.0}"

log() { echo "govulncheck.sh: $*" >&2; }

if [[ ! -x "$GOVULNCHECK" ]]; then
  log "installing golang.org/x/vuln/cmd/govulncheck@latest"
  if ! "$GO" install golang.org/x/vuln/cmd/govulncheck@latest; then
    # latest may need a module version the proxy refuses to serve.
    log "latest did not install; trying $FALLBACK_VERSION"
    "$GO" install "golang.org/x/vuln/cmd/govulncheck@$FALLBACK_VERSION"
  fi
fi
log "$("$GOVULNCHECK" -version 2>/dev/null | grep -m1 -i 'scanner' || echo govulncheck)"

args=("$@")
((${#args[@]})) || args=(./...)
db=()
[[ -n "${GOVULNDB:-}" ]] && db=(-db "$GOVULNDB")

# Loading the packages takes ~25 s before govulncheck first asks the
# database: see first whether an http(s) database answers at all.
dburl="${GOVULNDB:-https://vuln.go.dev}"
if [[ "$dburl" == http* ]] && command -v curl >/dev/null &&
  ! curl -fsS -o /dev/null --max-time 5 "$dburl/index/db.json.gz" 2>/dev/null; then
  if [[ "${GOVULNCHECK_REQUIRED:-0}" == 1 ]]; then
    log "FAILED: the vulnerability database $dburl is unreachable (set GOVULNDB to a local copy)"
    exit 1
  fi
  log "SKIPPED: the vulnerability database $dburl is unreachable from this machine; nothing was checked." \
    "Set GOVULNDB=file:///path/to/vulndb, or GOVULNCHECK_REQUIRED=1 to fail instead."
  exit 0
fi

out="$(mktemp)"
trap 'rm -f "$out"' EXIT
start=$SECONDS
status=0
"$GOVULNCHECK" "${db[@]}" "${args[@]}" 2>&1 | tee "$out" || status=$?
log "took $((SECONDS - start))s, exit $status"

# 3 means vulnerabilities were found: never mistake that for an unreachable database.
if ((status != 0 && status != 3)) && grep -qE 'fetching vulnerabilities|vuln\.go\.dev|no such host|dial tcp' "$out"; then
  if [[ "${GOVULNCHECK_REQUIRED:-0}" == 1 ]]; then
    log "FAILED: the vulnerability database is unreachable (set GOVULNDB to a local copy)"
    exit 1
  fi
  log "SKIPPED: the vulnerability database (${GOVULNDB:-https://vuln.go.dev}) is unreachable from this machine;" \
    "nothing was checked. Set GOVULNDB=file:///path/to/vulndb, or GOVULNCHECK_REQUIRED=1 to fail instead."
  exit 0
fi
exit "$status"
