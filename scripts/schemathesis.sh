#!/usr/bin/env bash
# schemathesis.sh — schema-based API fuzzing: runs schemathesis (from PyPI)
# against api/openapi.yaml on a running payserver. It must find no 5xx and no
# answer that breaks the document.
#
# Usage: scripts/schemathesis.sh
#
# By default it builds payserver, starts it in the embedded mode (SQLite in a
# temp data dir, in-process Redis, a temp limits file, admin token set) on a
# random loopback port, runs schemathesis with every check, stops the server
# and exits non-zero on any failure. The integration test
# integration/TestSchemathesis runs the same script against a payserver on
# real MariaDB and Redis by setting ST_BASE_URL and ST_TOKEN.
#
# Environment:
#   ST_MAX_EXAMPLES   test cases per operation and phase (default 50; ~30 s)
#   ST_SEED           hypothesis seed (default: random; printed, so a failure
#                     can be replayed with the same seed)
#   ST_BASE_URL       test this running server instead of starting one
#   ST_TOKEN          its admin token (with ST_BASE_URL)
#   ST_CLIENT_TOKEN   a client token of it (PAYSERVER_CLIENT_TOKENS), for
#                     the /v1/limits routes (with ST_BASE_URL)
#   ST_SERVER_LOG     its log file, checked for internal errors (optional)
#   SCHEMATHESIS_VENV where schemathesis is installed (default
#                     /tmp/payserver-schemathesis-venv; created if missing)
#   SCHEMATHESIS_VERSION  pinned version (default 4.32.5)
#
# After schemathesis, a content-type sweep (Python, in the same venv) sends
# every state-changing operation bodies of other types (text/plain, forms,
# multipart, XML, a latin1 charset, none) and requires the documented JSON
# 415; and sends every path a 100 KB query and 20 KiB of headers, requiring
# the JSON 414 and 431.
#
# What is not a failure: a schema-valid request that payserver refuses for a
# reason the schema cannot express. These exist, and a hook allows exactly
# them (any other 400 to schema-valid data still fails):
#   POST /pay                    400 CHANNEL_NOT_SUPPORTED (a well-formed
#                                channel code that is not configured), and
#                                400 INVALID_REQUEST on `channel` alone for
#                                a payment without one whose bizType has no
#                                route in the limits document
#   GET /reports/channel-limits  400 INVALID_REQUEST on `from`/`to` only (to
#   GET /reports/routes          not after from, span over the cap, a time
#   GET /reports/channel-amounts before 1970; for the amounts, a span over
#   GET /reports/admissions      the granularity's cap)
#   POST /v1/limits/acquire      400 INVALID_REQUEST on `currency` alone for
#   GET /v1/limits/peek          an amount without its currency (OpenAPI 3.0
#                                has no dependent fields)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GO="${GO:-go}"
VENV="${SCHEMATHESIS_VENV:-/tmp/payserver-schemathesis-venv}"
VERSION="${SCHEMATHESIS_VERSION:-4.32.5}"
MAX_EXAMPLES="${ST_MAX_EXAMPLES:-50}"
SEED="${ST_SEED:-$((RANDOM * 32768 + RANDOM))}"

log() { echo "schemathesis.sh: $*" >&2; }

# ---------------------------------------------------------------- install
install_schemathesis() {
  if [[ -x "$VENV/bin/schemathesis" ]] &&
    [[ "$("$VENV/bin/schemathesis" --version 2>/dev/null)" == *"version $VERSION"* ]]; then
    return
  fi
  command -v python3 >/dev/null || { log "python3 not found"; exit 1; }
  log "installing schemathesis==$VERSION into $VENV"
  # A lock so that parallel runs (several test packages) install once.
  mkdir -p "$(dirname "$VENV")"
  exec 8>"$VENV.lock"
  flock 8
  if [[ ! -x "$VENV/bin/schemathesis" ]] ||
    [[ "$("$VENV/bin/schemathesis" --version 2>/dev/null)" != *"version $VERSION"* ]]; then
    [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "schemathesis==$VERSION"
  fi
  flock -u 8
  exec 8>&-
}
install_schemathesis

WORK="$(mktemp -d /tmp/payserver-schemathesis.XXXXXX)"
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# ---------------------------------------------------------------- server
if [[ -n "${ST_BASE_URL:-}" ]]; then
  BASE="$ST_BASE_URL"
  TOKEN="${ST_TOKEN:-}"
  CLIENT_TOKEN="${ST_CLIENT_TOKEN:-}"
  SERVER_LOG="${ST_SERVER_LOG:-}"
else
  log "building payserver"
  (cd "$ROOT" && "$GO" build -o "$WORK/payserver" ./cmd/payserver)
  TOKEN="st-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  CLIENT_TOKEN="stc-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  cat >"$WORK/limits.yaml" <<'EOF'
window: 1s
routes:
  ONLINE_PAY: [UNIONPAY, ALIPAY, WECHAT]
  DEMO: [ALIPAY]
  REFUND: [ALIPAY, WECHAT]
limits:
  ONLINE_PAY:ALIPAY: 100
  ONLINE_PAY:WECHAT: -1
  ONLINE_PAY:UNIONPAY: 0
  DEMO:ALIPAY: {limit: 2, window: 1s}
  REFUND:ALIPAY:
    - {limit: 20, window: 1s}
    - {limit: 600, window: 1m}
EOF
  # Declines (200 FAILED) and timeouts (200 UNKNOWN). No simulated system
  # errors: their 502 CHANNEL_ERROR is documented but is a 5xx that
  # not_a_server_error would (rightly, for user input) flag.
  cat >"$WORK/payserver.yaml" <<'EOF'
channelTimeout: 300ms
channels:
  ALIPAY: {declineRate: 0.1, timeoutRate: 0.02}
  WECHAT: {}
  UNIONPAY: {declineRate: 0.5}
EOF
  SERVER_LOG="$WORK/payserver.log"
  PAYSERVER_HTTP_ADDR=127.0.0.1:0 PAYSERVER_DATA_DIR="$WORK/data" PAYSERVER_CONFIG="$WORK/payserver.yaml" \
    PAYSERVER_LIMITS_FILE="$WORK/limits.yaml" PAYSERVER_ADMIN_TOKEN="$TOKEN" PAYSERVER_LOG_LEVEL=info \
    PAYSERVER_CLIENT_TOKENS="schemathesis=$CLIENT_TOKEN" PAYSERVER_AUTH_MAX_FAILURES=1000000 \
    "$WORK/payserver" >"$SERVER_LOG" 2>&1 &
  SERVER_PID=$!
  addr=""
  for _ in $(seq 1 200); do
    addr="$(sed -n 's/.*msg="payserver listening" addr=\([0-9.:]*\).*/\1/p' "$SERVER_LOG" | head -1)"
    [[ -n "$addr" ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$SERVER_LOG" >&2; log "payserver exited at start"; exit 1; }
    sleep 0.1
  done
  [[ -n "$addr" ]] || { cat "$SERVER_LOG" >&2; log "payserver did not start in 20s"; exit 1; }
  BASE="http://$addr"
  log "payserver (embedded) on $BASE"
fi

# ---------------------------------------------------------------- config
# The two refusals the schema cannot express (see the header) are let
# through positive_data_acceptance for their operations only, and the hook
# check below makes sure that every such 400 is one of them.
# Dictionaries steer part of the generated data to values the server knows
# (configured channels, limited bizTypes, a valid report span), so that the
# answers past validation (200, 429, the report) are fuzzed too.
cat >"$WORK/schemathesis.toml" <<'EOF'
[dictionaries]
channels = { values = ["ALIPAY", "WECHAT", "UNIONPAY"] }
biztypes = { values = ["ONLINE_PAY", "DEMO", "REFUND"] }
report-from = { values = ["2026-03-01T10:00:00Z", "2026-03-01T10:20:30+08:00", "1970-01-01T00:00:00Z"] }
report-to = { values = ["2026-03-01T11:00:00Z", "2026-03-01T12:00:01.5Z", "2026-03-02T10:00:00Z"] }

[parameters]
"body.channel" = { dictionary = "channels", probability = 0.7 }
"body.bizType" = { dictionary = "biztypes", probability = 0.5 }
"query.channel" = { dictionary = "channels", probability = 0.7 }
"query.bizType" = { dictionary = "biztypes", probability = 0.5 }
"query.from" = { dictionary = "report-from", probability = 0.6 }
"query.to" = { dictionary = "report-to", probability = 0.6 }

[[operations]]
include-operation-id = ["pay", "getChannelLimitReport", "getRouteReport", "getChannelAmountReport", "admissionsReport"]
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", 400, 401, 403, 404, 409, 429, "5xx"]

# The limits service: a full window is 429 (acquire), a requestId of a
# POST /pay payment cannot be released by a client (409), and a release
# that finds no slot of the client's is 404.
[[operations]]
include-operation-id = ["releaseLimit"]
checks.positive_data_acceptance.expected-statuses = ["2xx", 404, 409, 429]

# A proposed limits document the server would refuse is a 400 naming the
# reason: the schema cannot say what a valid document is.
[[operations]]
include-operation-id = ["postLimitsWhatIf", "dashboardWhatIf"]
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", 400, 401, 403, 404, 409, 429, "5xx"]

[[operations]]
include-operation-id = ["acquireLimit", "peekLimit"]
checks.positive_data_acceptance.expected-statuses = ["2xx", 400, 409, 429]
EOF
# Each operation gets the token of its security scheme: the admin token
# for admin routes, the client token for /v1/limits.
if [[ -n "$TOKEN" ]]; then
  printf '\n[auth.openapi.bearerAuth]\nbearer = "%s"\n' "$TOKEN" >>"$WORK/schemathesis.toml"
fi
if [[ -n "${CLIENT_TOKEN:-}" ]]; then
  printf '\n[auth.openapi.clientToken]\nbearer = "%s"\n' "$CLIENT_TOKEN" >>"$WORK/schemathesis.toml"
fi
cat >"$WORK/hooks.py" <<'EOF'
import schemathesis


@schemathesis.check
def payserver_semantic_refusals_only(ctx, response, case):
    """A schema-valid request may be refused with 400 only for the reasons
    the schema cannot express: an unconfigured channel on POST /pay, or no
    channel for a bizType without a route, the from/to relation on the
    reports, and an amount without its currency on acquire and peek."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 400:
        return None
    label = case.operation.label
    if label not in ("POST /pay", "GET /reports/channel-limits", "GET /reports/routes", "GET /reports/channel-amounts", "GET /reports/admissions",
                     "POST /v1/limits/acquire", "GET /v1/limits/peek"):
        return None
    body = response.json()
    fields = {f.get("field") for f in body.get("details", {}).get("fields", [])}
    if label in ("POST /v1/limits/acquire", "GET /v1/limits/peek"):
        sent = (case.body if isinstance(case.body, dict) else case.query) or {}
        if body.get("code") != "INVALID_REQUEST" or fields != {"currency"} or sent.get("amount") in (None, "") or sent.get("currency") not in (None, ""):
            raise AssertionError(f"schema-valid limits request refused with {body.get('code')} on {sorted(fields)}: {body}")
        return None
    if label == "POST /pay":
        sent = case.body if isinstance(case.body, dict) else {}
        unrouted = not sent.get("channel") and body.get("code") == "INVALID_REQUEST" and fields == {"channel"}
        if body.get("code") != "CHANNEL_NOT_SUPPORTED" and not unrouted:
            raise AssertionError(f"schema-valid payment refused with {body.get('code')}: {body}")
        return None
    if body.get("code") != "INVALID_REQUEST" or not fields or not fields <= {"from", "to"}:
        raise AssertionError(f"schema-valid report query refused for {sorted(fields)}: {body}")
    return None
EOF

# ---------------------------------------------------------------- run
log "schemathesis $VERSION: --checks all, --max-examples $MAX_EXAMPLES, --seed $SEED against $BASE"
status=0
(cd "$WORK" && SCHEMATHESIS_HOOKS="$WORK/hooks.py" "$VENV/bin/schemathesis" --config-file "$WORK/schemathesis.toml" \
  run "$ROOT/api/openapi.yaml" --url "$BASE" \
  --checks all --max-examples "$MAX_EXAMPLES" --seed "$SEED" \
  --generation-database none --request-timeout 40 --no-color) || status=$?

# ---------------------------------------------------------------- content types
# Schemathesis sends the media types the document lists. Every state-changing
# operation (POST, PUT, PATCH, DELETE) must also refuse every other body type
# with a documented 415 whose body is the JSON error, and accept
# application/json with a charset (a browser form route, which documents
# only its form type, takes that and refuses JSON too); an oversized path
# and header must get the
# JSON error body too (414, 431), on every path.
log "content types: every state-changing operation refuses non-JSON bodies with a documented JSON 415"
cat >"$WORK/content_types.py" <<'EOF2'
import json, sys, uuid
import requests, yaml

spec_path, base, token, client_token = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
spec = yaml.safe_load(open(spec_path))
# Authentication comes before the content type: each route gets its own
# caller's token (the limits service's client token, else the admin's).
admin_auth = {"Authorization": f"Bearer {token}"} if token else {}
client_auth = {"Authorization": f"Bearer {client_token}"} if client_token else {}
wrong = ["text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
         "multipart/form-data; boundary=x", "application/xml", "application/json; charset=latin1",
         "application/merge-patch+json", None]
failures, checked = [], 0

def json_error(resp, status, code):
    if resp.status_code != status:
        return f"status {resp.status_code}, want {status}: {resp.text[:200]}"
    if not resp.headers.get("Content-Type", "").startswith("application/json"):
        return f"Content-Type {resp.headers.get('Content-Type')!r}, want application/json"
    try:
        body = resp.json()
    except ValueError:
        return f"body is not JSON: {resp.text[:200]}"
    if body.get("code") != code or not body.get("message") or not isinstance(body.get("details"), dict):
        return f"body is not the {code} error: {body}"
    return None

def concrete(path):
    return path.replace("{requestId}", "ct-" + uuid.uuid4().hex[:12]).replace("{", "").replace("}", "")

for path, item in spec["paths"].items():
    for method in ("post", "put", "patch", "delete"):
        op = item.get(method)
        if op is None:
            continue
        if "415" not in op.get("responses", {}):
            failures.append(f"{method.upper()} {path}: 415 is not documented")
        auth = client_auth if path.startswith("/v1/limits/") else admin_auth
        media = set(op.get("requestBody", {}).get("content", {}))
        # A browser form (the dashboard's login, logout and what-if) takes
        # its own types and refuses every other, JSON included, with the
        # JSON 415.
        form = sorted(media)[0] if media and "application/json" not in media else None
        refused = [c for c in wrong if c != form and not (form and c and c.split(";")[0] in media)] + (["application/json"] if form else [])
        for ct in refused:
            headers = dict(auth)
            if ct is not None:
                headers["Content-Type"] = ct
            resp = requests.request(method, base + concrete(path), data=b'{"requestId":"ct-1"}', headers=headers, timeout=10)
            checked += 1
            problem = json_error(resp, 415, "UNSUPPORTED_MEDIA_TYPE")
            if problem:
                failures.append(f"{method.upper()} {path} Content-Type {ct!r}: {problem}")
        if form:
            resp = requests.request(method, base + concrete(path), data=b"token=x", headers={**auth, "Content-Type": form}, timeout=10)
            checked += 1
            if resp.status_code == 415:
                failures.append(f"{method.upper()} {path}: its own {form} refused with 415")
            continue
        resp = requests.request(method, base + concrete(path), data=b'{"requestId":"ct-1"',
                                headers={**auth, "Content-Type": "application/json; charset=UTF-8"}, timeout=10)
        checked += 1
        if resp.status_code == 415:
            failures.append(f"{method.upper()} {path}: application/json; charset=UTF-8 refused with 415")

for path in spec["paths"]:
    p = concrete(path)
    for what, kwargs, status, code in [
        ("100 KB path", {"url": base + p + ("&" if "?" in p else "?") + "q=" + "a" * (100 << 10)}, 414, "URI_TOO_LONG"),
        ("20 KiB header", {"url": base + p, "headers": {**auth, "X-Big": "b" * (20 << 10)}}, 431, "HEADERS_TOO_LARGE"),
    ]:
        resp = requests.get(timeout=10, **kwargs)
        checked += 1
        problem = json_error(resp, status, code)
        if problem:
            failures.append(f"GET {path} {what}: {problem}")

for f in failures:
    print("FAIL", f)
print(f"{checked} content-type and size requests, {len(failures)} failures")
sys.exit(1 if failures else 0)
EOF2
"$VENV/bin/python" "$WORK/content_types.py" "$ROOT/api/openapi.yaml" "$BASE" "${TOKEN:-}" "${CLIENT_TOKEN:-}" >&2 || status=1

# The server must have logged no internal error and no panic.
if [[ -n "${SERVER_LOG:-}" && -f "$SERVER_LOG" ]]; then
  if grep -E 'level=ERROR|"level":"ERROR"|panic|DATA RACE' "$SERVER_LOG" >&2; then
    log "payserver logged errors during the run (above)"
    status=1
  fi
fi
if ((status != 0)); then
  log "FAILED (seed $SEED; rerun with ST_SEED=$SEED)"
else
  log "ok: no 5xx, no answer that breaks api/openapi.yaml"
fi
exit "$status"
