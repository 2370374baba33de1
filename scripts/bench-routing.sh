#!/usr/bin/env bash
# bench-routing.sh - the cost of a routed POST /pay against a pinned one,
# side by side in one run on the durable MariaDB and Redis (make
# bench-routing). A scenario of its own beside scripts/bench-e2e.sh, whose
# harness it does not change; it reuses bench/e2e/pay.lua through
# bench/e2e/route.lua.
#
# One payserver (the shipped defaults, log level warn, zero-latency
# simulators) on a fresh database (payserver_bench_route) on the durable
# MariaDB (innodb_flush_log_at_trx_commit=1, sync_binlog=1) and a Redis, both
# this run's own (the testenv command starts them on free loopback ports).
# Three runs, interleaved ROUTE_ROUNDS times so
# that all see the same machine, each ROUTE_DURATION at ROUTE_CONCURRENCY
# connections, every request with a requestId of its own:
#   pinned    channel ALIPAY, RPIN:ALIPAY = 10,000,000 per 1s
#   routed    no channel, route RROUTE: [ALIPAY, WECHAT], ALIPAY roomy:
#             every payment goes to its first candidate
#   fallback  no channel, route RFALL: [WECHAT, ALIPAY], WECHAT full
#             (1 per hour, filled first): every payment is refused by
#             WECHAT's limiter (near-cache on, as shipped) and goes to ALIPAY
# It prints each run, the totals and RATIO lines (routed/pinned,
# fallback/pinned; reported, no target), between the conditions
# (bench/benchenv: commit, machine, load, what else ran). Output also goes
# to bench/out/routing.txt.
#
# Knobs: ROUTE_DURATION (8s), ROUTE_ROUNDS (3), ROUTE_CONCURRENCY (64),
# ROUTE_THREADS (2), ROUTE_PORT (18190).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO="${GO:-go}"
[[ -n "${PAYSERVER_TEST_MYSQL_DURABLE_ADDR:-}" ]] ||
  exec "$GO" run ./internal/testenv/cmd/testenv -services redis,mariadb-durable -- "scripts/$(basename "$0")" "$@"
DURATION="${ROUTE_DURATION:-8s}"
ROUNDS="${ROUTE_ROUNDS:-3}"
CONC="${ROUTE_CONCURRENCY:-64}"
THREADS="${ROUTE_THREADS:-2}"
PORT="${ROUTE_PORT:-18190}"
HOST=127.0.0.1
MYSQL_PORT="${PAYSERVER_TEST_MYSQL_DURABLE_ADDR##*:}"
REDIS_PORT="${PAYSERVER_TEST_REDIS_ADDR##*:}"
DB=payserver_bench_route
OUT=bench/out/routing.txt

log() { echo "bench-routing: $*" >&2; }
die() { echo "bench-routing: FAIL: $*" >&2; exit 1; }

scripts/install-wrk.sh || die "wrk is missing and could not be installed"
WORK="$(mktemp -d /tmp/payserver-bench-routing.XXXXXX)"
PID=""
cleanup() {
  [[ -z "$PID" ]] || { kill -TERM "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
  rm -rf "$WORK"
}
trap cleanup EXIT

mariadb --no-defaults --protocol=tcp -h "$HOST" -P "$MYSQL_PORT" -upayserver -ppayserver -N \
  -e "DROP DATABASE IF EXISTS $DB; CREATE DATABASE $DB CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
for k in RPIN RROUTE RFALL; do # keys are payserver:rl:{CHANNEL}:BIZTYPE:...
  redis-cli -h "$HOST" -p "$REDIS_PORT" --scan --pattern "payserver:rl:*:$k:*" | xargs -r redis-cli -h "$HOST" -p "$REDIS_PORT" del >/dev/null
done
log "building payserver"
"$GO" build -o "$WORK/payserver" ./cmd/payserver
"$GO" build -o "$WORK/benchenv" ./bench/benchenv/cmd/benchenv
cat >"$WORK/limits.yaml" <<'YAML'
window: 1s
routes:
  RROUTE: [ALIPAY, WECHAT]
  RFALL: [WECHAT, ALIPAY]
limits:
  RPIN:ALIPAY: {limit: 10000000, window: 1s}
  RROUTE:ALIPAY: {limit: 10000000, window: 1s}
  RFALL:WECHAT: {limit: 1, window: 1h}
  RFALL:ALIPAY: {limit: 10000000, window: 1s}
YAML
printf 'channels:\n  ALIPAY: {}\n  WECHAT: {}\n' >"$WORK/payserver.yaml"
(
  export PAYSERVER_CONFIG="$WORK/payserver.yaml" PAYSERVER_HTTP_ADDR="$HOST:$PORT"
  export PAYSERVER_DATA_DIR="$WORK/data" PAYSERVER_LIMITS_FILE="$WORK/limits.yaml"
  export PAYSERVER_MYSQL_DSN="payserver:payserver@tcp($HOST:$MYSQL_PORT)/$DB?parseTime=true&loc=UTC"
  export PAYSERVER_AUTO_MIGRATE=true PAYSERVER_REDIS_ADDR="$HOST:$REDIS_PORT" PAYSERVER_LOG_LEVEL=warn
  exec "$WORK/payserver"
) >"$WORK/payserver.log" 2>&1 &
PID=$!
for _ in $(seq 150); do
  [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://$HOST:$PORT/readyz")" == 200 ]] && break
  kill -0 "$PID" 2>/dev/null || { cat "$WORK/payserver.log" >&2; die "payserver exited"; }
  sleep 0.1
done
code="$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$HOST:$PORT/pay" -H 'Content-Type: application/json' \
  -d '{"requestId":"route-fill-'"$$"'","bizType":"RFALL","channel":"WECHAT","merchantId":"M1","amount":1999,"currency":"CNY"}')"
[[ "$code" == 200 ]] || die "filling RFALL:WECHAT answered $code"

RESULTS="$WORK/results"
: >"$RESULTS"
RUN="r$(date +%s)"
{
  "$WORK/benchenv" begin -state "$WORK/benchenv.json" -title "routed against pinned POST /pay (scripts/bench-routing.sh)"
  echo "bench-routing: durable MariaDB :$MYSQL_PORT, Redis :$REDIS_PORT,"
  echo "  $CONC connections, $THREADS wrk threads, $ROUNDS interleaved rounds of $DURATION per run"
  for r in $(seq "$ROUNDS"); do
    for spec in "pinned pinned RPIN" "routed routed RROUTE" "fallback routed RFALL"; do
      read -r label mode biz <<<"$spec"
      out="$(timeout 120 wrk -t"$THREADS" -c"$CONC" -d"$DURATION" --timeout 10s -s bench/e2e/route.lua \
        "http://$HOST:$PORT" -- "$label" "$mode" "$biz" "$RUN-$r-$label")" || die "wrk $label failed: $out"
      grep -E -e '^  run ' -e '^  answers' -e '^ +[0-9]+ +[0-9]+\.[0-9]+ ' <<<"$out"
      grep '^RESULT ' <<<"$out" >>"$RESULTS"
      kill -0 "$PID" 2>/dev/null || die "payserver died during $label"
    done
  done
  echo
  awk '$1 == "RESULT" {
      for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      l = f["label"]; req[l] += f["requests"]; secs[l] += f["secs"]; ok[l] += f["ok"]; n[l]++
      p50[l] += f["p50_us"]; p99[l] += f["p99_us"]
    }
    END {
      printf "  %-10s %10s %10s %12s %12s\n", "run", "req/s", "2xx", "p50 ms (avg)", "p99 ms (avg)"
      split("pinned routed fallback", ls, " ")
      for (j = 1; j <= 3; j++) { l = ls[j]; rps[l] = req[l] / secs[l]
        printf "  %-10s %10.0f %10d %12.2f %12.2f\n", l, rps[l], ok[l], p50[l] / n[l] / 1000, p99[l] / n[l] / 1000 }
      printf "RATIO routed/pinned req/s = %.3f (reported)\n", rps["routed"] / rps["pinned"]
      printf "RATIO fallback/pinned req/s = %.3f (reported)\n", rps["fallback"] / rps["pinned"]
      printf "RATIO routed/pinned p50 = %.3f (reported)\n", p50["routed"] / p50["pinned"]
      printf "RATIO fallback/pinned p50 = %.3f (reported)\n", p50["fallback"] / p50["pinned"]
    }' "$RESULTS"
  echo
  "$WORK/benchenv" end -state "$WORK/benchenv.json"
} | tee /dev/stderr >"$WORK/out.txt"
mkdir -p "$(dirname "$OUT")"
cp "$WORK/out.txt" "$OUT"
grep -q ' 2xx' "$OUT" || die "no results"
awk '$1 == "RESULT" && $0 !~ / non2xx=0 / { bad = 1 } END { exit bad }' "$RESULTS" || die "some answers were not 2xx: see $OUT"
