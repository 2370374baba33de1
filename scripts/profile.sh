#!/usr/bin/env bash
# profile.sh — CPU and allocation profiles (pprof) of payserver's admitted
# POST /pay path under load, on real MariaDB and Redis.
#
# Usage: scripts/profile.sh [BIZTYPE]   (default ROOMY: limited key with room;
#                                        BENCH: unlimited; FULL: refused)
#
# Builds payserver, runs it on a fresh database (payserver_bench_profile)
# with PAYSERVER_PPROF_ADDR on a loopback port of its own, drives POST /pay
# with wrk (bench/e2e/pay.lua: a new requestId per request) at
# PROFILE_CONCURRENCY (50) for PROFILE_SECONDS (10) after a 3 s warm-up, and
# meanwhile takes a CPU profile and a delta allocation profile of the same
# seconds. Writes bench/out/profile/{cpu,allocs}.pprof and top.txt (the
# heaviest functions, flat and cumulative, between the run's conditions:
# bench/benchenv) and prints top.txt, headed by the
# database's work per request over the profiled run: statements by kind
# (SHOW GLOBAL STATUS Com_* and Questions deltas; exact on the durable
# MariaDB, which nothing else uses) and mariadbd CPU ms per request. Then,
# unless PROFILE_COMPARE=0, the same run measures side by side what the
# contract's ratios compare against: GET /healthz (the same middleware, a
# no-op handler) with wrk at the same concurrency, and mysqlslap's
# single-row autocommit INSERT into an orders-shaped table on the same
# MariaDB at the same concurrency; it prints payserver CPU ms per request
# and the RATIO lines: admitted ÷ mysqlslap (ROOMY, BENCH; target 0.5) or
# 429 ÷ /healthz (FULL; target 0.6), with CPU per request against 0.15 ms
# (admitted) and 0.05 ms (429).
#
# PROFILE_MARIADB: durable (default: innodb_flush_log_at_trx_commit=1, binary
# log, sync_binlog=1) or tests (the tests' settings, not durable). The MariaDB
# and Redis are this run's own, started by the testenv command
# (internal/testenv) on free loopback ports.
# Inspect further with: go tool pprof -http 127.0.0.1:0 bench/out/profile/cpu.pprof
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO="${GO:-go}"
case "${PROFILE_MARIADB:-durable}" in
  durable) MARIADB=mariadb-durable MADDR=PAYSERVER_TEST_MYSQL_DURABLE_ADDR ;;
  tests) MARIADB=mariadb MADDR=PAYSERVER_TEST_MYSQL_ADDR ;;
  *) echo "profile.sh: PROFILE_MARIADB is durable or tests, not '$PROFILE_MARIADB'" >&2; exit 2 ;;
esac
[[ -n "${PAYSERVER_TEST_REDIS_ADDR:-}" && -n "${!MADDR:-}" ]] ||
  exec "$GO" run ./internal/testenv/cmd/testenv -services "redis,$MARIADB" -- "scripts/$(basename "$0")" "$@"
BIZ="${1:-ROOMY}"
SECS="${PROFILE_SECONDS:-10}"
C="${PROFILE_CONCURRENCY:-50}"
HOST=127.0.0.1
PORT="${PROFILE_PORT:-18095}"
PPROF="$HOST:$((PORT + 1))"
DB=payserver_bench_profile
OUT=bench/out/profile
if [[ "$MARIADB" == mariadb-durable ]]; then
  MPORT="${PAYSERVER_TEST_MYSQL_DURABLE_ADDR##*:}" MARIADB_PID="$PAYSERVER_TEST_MYSQL_DURABLE_PID"
else
  MPORT="${PAYSERVER_TEST_MYSQL_ADDR##*:}" MARIADB_PID="$PAYSERVER_TEST_MYSQL_PID"
fi
REDIS_PORT="${PAYSERVER_TEST_REDIS_ADDR##*:}"

die() { echo "profile.sh: FAIL: $*" >&2; exit 1; }
scripts/install-wrk.sh || die "wrk is missing and could not be installed"
msql() { mariadb --no-defaults --protocol=tcp -h "$HOST" -P "$MPORT" -upayserver -ppayserver -N "$@"; }
# status: the statement counters and mariadbd's CPU ticks, one "name value" a line.
status() {
  msql -e "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions','Com_select','Com_insert','Com_update','Com_stmt_execute','Com_stmt_prepare','Com_begin','Com_commit')"
  awk '{ print "cpu_ticks", $14 + $15 }' "/proc/$MARIADB_PID/stat"
  awk '{ print "payserver_ticks", $14 + $15 }' "/proc/$PID/stat"
  curl -s "http://$HOST:$PORT/metrics" | awk '/^payserver_http_requests_total.*route="\/pay"/ { n += $NF } END { printf "pay_requests %d\n", n }'
}
# ticks: payserver's CPU ticks (user + system) now.
ticks() { awk '{ print $14 + $15 }' "/proc/$PID/stat"; }

WORK="$(mktemp -d /tmp/payserver-profile.XXXXXX)"
PID=""
cleanup() {
  [[ -n "$PID" ]] && { kill -TERM "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
  rm -rf "$WORK"
}
trap cleanup EXIT

"$GO" build -o "$WORK/payserver" ./cmd/payserver
"$GO" build -o "$WORK/benchenv" ./bench/benchenv/cmd/benchenv
msql -e "DROP DATABASE IF EXISTS $DB; CREATE DATABASE $DB CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
redis-cli -h "$HOST" -p "$REDIS_PORT" --scan --pattern 'payserver:rl:{ALIPAY}:FULL:*' | xargs -r redis-cli -h "$HOST" -p "$REDIS_PORT" del >/dev/null
cat >"$WORK/limits.yaml" <<'EOF'
window: 1s
limits:
  BENCH:ALIPAY: -1
  ROOMY:ALIPAY: {limit: 10000000, window: 1s}
  FULL:ALIPAY: {limit: 1, window: 1h}
EOF
printf 'channels:\n  ALIPAY: {}\n' >"$WORK/payserver.yaml"
(
  export PAYSERVER_CONFIG="$WORK/payserver.yaml" PAYSERVER_HTTP_ADDR="$HOST:$PORT" PAYSERVER_PPROF_ADDR="$PPROF"
  export PAYSERVER_DATA_DIR="$WORK/data" PAYSERVER_LIMITS_FILE="$WORK/limits.yaml"
  export PAYSERVER_MYSQL_DSN="payserver:payserver@tcp($HOST:$MPORT)/$DB?parseTime=true&loc=UTC"
  export PAYSERVER_AUTO_MIGRATE=true PAYSERVER_REDIS_ADDR="$HOST:$REDIS_PORT" PAYSERVER_LOG_LEVEL=warn
  export PAYSERVER_LIMITER_TIMEOUT=1s
  exec "$WORK/payserver"
) >"$WORK/payserver.log" 2>&1 &
PID=$!
for _ in $(seq 150); do
  [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://$HOST:$PORT/readyz")" == 200 ]] && break
  kill -0 "$PID" 2>/dev/null || { cat "$WORK/payserver.log" >&2; die "payserver exited"; }
  sleep 0.1
done
if [[ "$BIZ" == FULL ]]; then
  curl -s -o /dev/null -X POST "http://$HOST:$PORT/pay" -H 'Content-Type: application/json' \
    -d '{"requestId":"profile-fill","bizType":"FULL","channel":"ALIPAY","merchantId":"M1","amount":1999,"currency":"CNY"}'
fi

mkdir -p "$OUT"
"$WORK/benchenv" begin -state "$WORK/benchenv.json" -title "payserver profile (scripts/profile.sh)" >"$WORK/begin.txt"
timeout $((SECS + 30)) wrk -t2 -c"$C" -d$((SECS + 5))s --timeout 10s -s bench/e2e/pay.lua \
  "http://$HOST:$PORT" -- "profile-$BIZ" pay "$BIZ" "prof$(date +%s)" >"$WORK/wrk.txt" 2>&1 &
WRK=$!
sleep 3
status >"$WORK/status0"
curl -sf -o "$OUT/allocs.pprof" "http://$PPROF/debug/pprof/allocs?seconds=$SECS" &
ALLOCS=$!
curl -sf -o "$OUT/cpu.pprof" "http://$PPROF/debug/pprof/profile?seconds=$SECS" || die "CPU profile failed"
wait "$ALLOCS" || die "allocation profile failed"
status >"$WORK/status1"
wait "$WRK" || die "wrk failed: $(cat "$WORK/wrk.txt")"

# The comparisons, in the same run: /healthz with wrk, then mysqlslap.
HZ="$(getconf CLK_TCK)"
if [[ "${PROFILE_COMPARE:-1}" != 0 ]]; then
  t0="$(ticks)"
  wrk -t2 -c"$C" -d"${SECS}s" --timeout 10s "http://$HOST:$PORT/healthz" >"$WORK/healthz.txt" 2>&1 || die "wrk /healthz failed"
  t1="$(ticks)"
  hz_rps="$(awk '/^Requests\/sec/ { print $2 }' "$WORK/healthz.txt")"
  hz_cpu="$(awk -v t="$((t1 - t0))" -v hz="$HZ" -v r="$hz_rps" -v s="$SECS" 'BEGIN { printf "%.3f", t * 1000 / hz / (r * s) }')"
  SLAP="$(command -v mariadb-slap || command -v mysqlslap || true)"
  [[ -n "$SLAP" ]] || die "mariadb-slap/mysqlslap not found (Debian package mariadb-client)"
  create="CREATE TABLE orders ($(sed -n '/^CREATE TABLE orders (/,/^) ENGINE/p' migrations/mysql/00001_*.sql | sed '1d;$d' | tr '\n' ' ')) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci"
  insert="INSERT INTO orders (order_no,request_id,request_hash,biz_type,channel,merchant_id,amount,currency,subject,status,channel_trade_no,failure_code,failure_message,created_at,updated_at) VALUES (CONCAT('PS',UUID_SHORT()),CONCAT('slap-',UUID_SHORT()),'9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08','BENCH','ALIPAY','M1',1999,'CNY','','PROCESSING','','','',UTC_TIMESTAMP(6),UTC_TIMESTAMP(6))"
  slap() { # slap N: seconds mysqlslap took for N inserts over C connections
    timeout 180 "$SLAP" --no-defaults --protocol=tcp -h "$HOST" -P "$MPORT" -upayserver -ppayserver --create-schema=payserver_bench_profile_slap \
      --create="$create" --query="$insert" --concurrency="$C" --number-of-queries="$1" --iterations=1 2>&1 |
      awk '/Average number of seconds/ { print $(NF-1) }'
  }
  cal="$(slap $((C * 40)))"
  n="$(awk -v s="$cal" -v c="$C" -v d="$SECS" 'BEGIN { n = int(c * 40 / s * d); if (n < c * 100) n = c * 100; print n }')"
  secs="$(slap "$n")"
  slap_rps="$(awk -v n="$n" -v s="$secs" 'BEGIN { printf "%.1f", n / s }')"
fi
"$WORK/benchenv" end -state "$WORK/benchenv.json" >"$WORK/end.txt"
cp "$WORK/payserver" "$OUT/payserver.bin"

{
  cat "$WORK/begin.txt"
  echo "== payserver profile: POST /pay $BIZ:ALIPAY, wrk -c$C, ${SECS}s of a $((SECS + 5))s run"
  grep -v '^RESULT' "$WORK/wrk.txt" | sed -n '/run profile/,$p'
  echo
  echo "== database work per POST /pay over the profiled ${SECS}s (MariaDB :$MPORT, $(msql -e 'SELECT CONCAT("innodb_flush_log_at_trx_commit=", @@innodb_flush_log_at_trx_commit, ", log_bin=", @@log_bin, ", sync_binlog=", @@sync_binlog)'))"
  awk -v hz="$(getconf CLK_TCK)" 'NR == FNR { a[$1] = $2; next } { d[$1] = $2 - a[$1] }
    END {
      n = d["pay_requests"]; if (n < 1) n = 1
      printf "  %d POST /pay answered; per request: Questions %.3f, Com_select %.3f, Com_insert %.3f, Com_update %.3f, Com_stmt_execute %.3f, Com_stmt_prepare %.4f, Com_begin %.3f, Com_commit %.3f\n",
        d["pay_requests"], d["Questions"] / n, d["Com_select"] / n, d["Com_insert"] / n, d["Com_update"] / n, d["Com_stmt_execute"] / n, d["Com_stmt_prepare"] / n, d["Com_begin"] / n, d["Com_commit"] / n
      printf "  mariadbd CPU ms per request: %.3f (shared with anything else on that server)\n", d["cpu_ticks"] * 1000 / hz / n
      printf "  payserver CPU ms per request: %.3f; POST /pay answered per second: %.0f\n", d["payserver_ticks"] * 1000 / hz / n, n / secs
    }' secs="$SECS" "$WORK/status0" "$WORK/status1" | tee "$WORK/db.txt"
  if [[ "${PROFILE_COMPARE:-1}" != 0 ]]; then
    echo
    echo "== side by side in this run, $C connections, ${SECS}s each"
    printf "  GET /healthz: %.0f/s, payserver CPU ms per request %s\n" "$hz_rps" "$hz_cpu"
    printf "  mysqlslap single-row INSERT (orders-shaped, autocommit): %.0f/s (%d inserts)\n" "$slap_rps" "$n"
    awk -v biz="$BIZ" -v hz="$hz_rps" -v slap="$slap_rps" '/payserver CPU ms per request/ {
        cpu = $6 + 0; rps = $NF + 0
        if (biz == "FULL") {
          printf "RATIO 429 / healthz = %.2f (target >= 0.6) %s\n", rps / hz, (rps / hz >= 0.6) ? "PASS" : "MISS"
          printf "CPU   payserver per 429 = %.3f ms (target <= 0.05) %s\n", cpu, (cpu <= 0.05) ? "PASS" : "MISS"
        } else {
          printf "RATIO admitted / mysqlslap = %.2f (target >= 0.5) %s\n", rps / slap, (rps / slap >= 0.5) ? "PASS" : "MISS"
          printf "CPU   payserver per admitted payment = %.3f ms (target <= 0.15) %s\n", cpu, (cpu <= 0.15) ? "PASS" : "MISS"
        } }' "$WORK/db.txt"
  fi
  echo
  echo "== CPU, cumulative (top 40)"
  "$GO" tool pprof -top -cum -nodecount=40 "$OUT/payserver.bin" "$OUT/cpu.pprof" 2>/dev/null | sed -n '/flat%/,$p'
  echo
  echo "== CPU, flat (top 25)"
  "$GO" tool pprof -top -nodecount=25 "$OUT/payserver.bin" "$OUT/cpu.pprof" 2>/dev/null | sed -n '/flat%/,$p'
  echo
  echo "== allocated bytes, cumulative (top 30)"
  "$GO" tool pprof -top -cum -sample_index=alloc_space -nodecount=30 "$OUT/payserver.bin" "$OUT/allocs.pprof" 2>/dev/null | sed -n '/flat%/,$p'
  echo
  echo "== allocated objects, flat (top 20)"
  "$GO" tool pprof -top -sample_index=alloc_objects -nodecount=20 "$OUT/payserver.bin" "$OUT/allocs.pprof" 2>/dev/null | sed -n '/flat%/,$p'
  echo
  cat "$WORK/end.txt"
} | tee "$OUT/top.txt"
echo "profile.sh: profiles in $OUT (go tool pprof $OUT/payserver.bin $OUT/cpu.pprof)" >&2
