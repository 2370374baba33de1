#!/usr/bin/env bash
# bench-e2e.sh — end-to-end benchmark of POST /pay on real MariaDB and Redis,
# against the machine's own ceilings, with RATIO lines measured side by side
# in one run (make bench-e2e). See docs/PERFORMANCE.md, "End-to-end".
#
# What it does:
#   1. installs wrk if missing (apt-get install -y wrk);
#   2. starts Redis (127.0.0.1:16379), the durable MariaDB (mariadb-durable,
#      127.0.0.1:13308: innodb_flush_log_at_trx_commit=1, binary log on,
#      sync_binlog=1, its own instance so the shared test server keeps its
#      settings) and the shared test MariaDB (127.0.0.1:13306,
#      innodb_flush_log_at_trx_commit=2) with scripts/services.sh;
#   3. builds payserver and runs three instances on a fresh database
#      (payserver_bench_e2e) on the durable MariaDB, zero-latency simulator
#      channels, log level warn: A with the near-cache on (the default), B
#      with it off, C with the near-cache on and no batching at all
#      (PAYSERVER_LIMITER_COALESCE, PAYSERVER_DB_GROUP_COMMIT and
#      PAYSERVER_DB_BATCH_READS false); and D, like A, on the shared
#      non-durable MariaDB;
#   4. the headline, on the durable MariaDB: for each concurrency (50, 64
#      and 200), runs wrk for E2E_DURATION each:
#        unlimited  POST /pay, BENCH:ALIPAY = -1 (no Redis call)     on A
#        roomy      POST /pay, ROOMY:ALIPAY = 10,000,000 per 1s       on A
#        roomy-nobatching  the same                                  on C
#        mysqlslap  single-row autocommit INSERT into an orders-shaped table,
#                   same MariaDB, same concurrency (not wrk)
#        mysqlslap-3stmt  the flow's own statements per payment: SELECT by
#                   request_id, INSERT, UPDATE by request_id (not wrk)
#        healthz    GET /healthz (no-op gin handler, same middleware) on A
#        full-nearcache  POST /pay, FULL:ALIPAY = 1 per 1h, near-cache on  on A
#        full-redis      POST /pay, FULL:ALIPAY, near-cache off            on B
#      every POST with a requestId of its own; one table per run;
#   5. secondary, labelled non-durable: unlimited and roomy on D and
#      mysqlslap on the shared MariaDB, at E2E_NONDURABLE_CONCURRENCY (64);
#   6. prints a summary table (req/s, p50/p99, CPU ms per request of
#      payserver, mariadbd and redis-server) and the RATIO lines, the
#      issue-16 targets first; then limiter checks/s at 64 callers, plain
#      client vs the coalescer as shipped (bench/e2e batching).
# Output is also written to bench/out/e2e.txt. A ratio under target prints
# MISS and does not fail the run; an error (a server down, a wrong status)
# does.
#
# Knobs: E2E_DURATION (10s), E2E_CONCURRENCY ("50 64 200"), E2E_THREADS (2),
# E2E_NONDURABLE_CONCURRENCY ("64"; "" skips step 5), E2E_BATCHING (1; 0
# skips the limiter batching part of step 6),
# E2E_PORT (18090: A; B, C and D are E2E_PORT+1, +2 and +3).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO="${GO:-go}"
DURATION="${E2E_DURATION:-10s}"
CONCURRENCY="${E2E_CONCURRENCY:-50 64 200}"
NONDURABLE_CONCURRENCY="${E2E_NONDURABLE_CONCURRENCY-64}"
THREADS="${E2E_THREADS:-2}"
PORT_A="${E2E_PORT:-18090}"
PORT_B=$((PORT_A + 1))
PORT_C=$((PORT_A + 2))
PORT_D=$((PORT_A + 3))
DURABLE_MYSQL_PORT=13308 # scripts/services.sh mariadb-durable
SHARED_MYSQL_PORT=13306  # scripts/services.sh mariadb
MYSQL_PORT="$DURABLE_MYSQL_PORT"
DB=payserver_bench_e2e
SLAP_DB=payserver_bench_slap
HOST=127.0.0.1
OUT=bench/out/e2e.txt

log() { echo "bench-e2e: $*" >&2; }
die() { echo "bench-e2e: FAIL: $*" >&2; exit 1; }

if ! command -v wrk >/dev/null 2>&1; then
  log "installing wrk (apt-get install -y wrk)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; } ||
    die "apt-get install wrk failed"
fi
scripts/services.sh start mariadb redis >&2
scripts/services.sh start mariadb-durable >&2
eval "$(scripts/services.sh env)"
SLAP="$(command -v mariadb-slap || command -v mysqlslap || true)"
[[ -n "$SLAP" ]] || die "mariadb-slap/mysqlslap not found (Debian package mariadb-client)"

WORK="$(mktemp -d /tmp/payserver-bench-e2e.XXXXXX)"
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

sql() { # sql PORT STATEMENTS
  mariadb --no-defaults --protocol=tcp -h "$HOST" -P "$1" -upayserver -ppayserver -N -e "$2"
}

log "building payserver"
"$GO" build -o "$WORK/payserver" ./cmd/payserver
"$GO" build -o "$WORK/e2e" ./bench/e2e

for p in "$DURABLE_MYSQL_PORT" "$SHARED_MYSQL_PORT"; do
  sql "$p" "DROP DATABASE IF EXISTS $DB; CREATE DATABASE $DB CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
done
DURABILITY="$(sql "$DURABLE_MYSQL_PORT" 'SELECT CONCAT("innodb_flush_log_at_trx_commit=", @@innodb_flush_log_at_trx_commit, ", log_bin=", @@log_bin, ", sync_binlog=", @@sync_binlog)')"
[[ "$DURABILITY" == "innodb_flush_log_at_trx_commit=1, log_bin=ON, sync_binlog=1" ]] ||
  die "the durable MariaDB on $DURABLE_MYSQL_PORT is not durable: $DURABILITY"
SHARED_DURABILITY="$(sql "$SHARED_MYSQL_PORT" 'SELECT CONCAT("innodb_flush_log_at_trx_commit=", @@innodb_flush_log_at_trx_commit, ", log_bin=", @@log_bin, ", sync_binlog=", @@sync_binlog)')"
for k in '{BENCH:ALIPAY}' '{ROOMY:ALIPAY}' '{FULL:ALIPAY}'; do
  redis-cli -h "$HOST" -p 16379 --scan --pattern "payserver:rl:$k:*" | xargs -r redis-cli -h "$HOST" -p 16379 del >/dev/null
done
cat >"$WORK/limits.yaml" <<'EOF'
window: 1s
limits:
  BENCH:ALIPAY: -1
  ROOMY:ALIPAY: {limit: 10000000, window: 1s}
  FULL:ALIPAY: {limit: 1, window: 1h}
EOF
cat >"$WORK/payserver.yaml" <<'EOF'
channels:
  ALIPAY: {}
EOF

# start_server NAME PORT NEARCACHE BATCHING MYSQL_PORT
start_server() {
  local name="$1" port="$2" nc="$3" batching="$4" mport="$5"
  (
    export PAYSERVER_CONFIG="$WORK/payserver.yaml" PAYSERVER_HTTP_ADDR="$HOST:$port"
    export PAYSERVER_DATA_DIR="$WORK/data-$name" PAYSERVER_LIMITS_FILE="$WORK/limits.yaml"
    export PAYSERVER_MYSQL_DSN="payserver:payserver@tcp($HOST:$mport)/$DB?parseTime=true&loc=UTC"
    export PAYSERVER_AUTO_MIGRATE=true PAYSERVER_REDIS_ADDR="$HOST:16379"
    export PAYSERVER_LOG_LEVEL=warn PAYSERVER_LIMITER_NEAR_CACHE="$nc"
    # A loaded machine should show as latency, not as degraded (local)
    # decisions: this measures throughput, not the outage policy.
    export PAYSERVER_LIMITER_TIMEOUT=1s
    if [[ "$batching" == false ]]; then
      export PAYSERVER_LIMITER_COALESCE=false PAYSERVER_DB_GROUP_COMMIT=false PAYSERVER_DB_BATCH_READS=false
    fi
    exec "$WORK/payserver"
  ) >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  local i
  for i in $(seq 150); do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://$HOST:$port/readyz")" == 200 ]] && return 0
    kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$WORK/$name.log" >&2; die "payserver $name exited"; }
    sleep 0.1
  done
  cat "$WORK/$name.log" >&2
  die "payserver $name not ready on $port"
}
start_server a "$PORT_A" true true "$DURABLE_MYSQL_PORT" # A must migrate before B starts
start_server b "$PORT_B" false true "$DURABLE_MYSQL_PORT"
start_server c "$PORT_C" true false "$DURABLE_MYSQL_PORT" # no batching
[[ -z "$NONDURABLE_CONCURRENCY" ]] || start_server d "$PORT_D" true true "$SHARED_MYSQL_PORT"

# Fill FULL:ALIPAY (1 per hour) with one admitted payment.
code="$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$HOST:$PORT_A/pay" -H 'Content-Type: application/json' \
  -d '{"requestId":"e2e-fill-'"$$"'","bizType":"FULL","channel":"ALIPAY","merchantId":"M1","amount":1999,"currency":"CNY"}')"
[[ "$code" == 200 ]] || die "filling FULL:ALIPAY answered $code"

DURABLE_MARIADB_PID="$(tr -dc '0-9' <"$PAYSERVER_SERVICES_DIR/mariadb-durable/mariadbd.pid")"
SHARED_MARIADB_PID="$(tr -dc '0-9' <"$PAYSERVER_SERVICES_DIR/mariadb/mariadbd.pid")"
MARIADB_PID="$DURABLE_MARIADB_PID" # the server of the runs in progress (and MYSQL_PORT)
REDIS_PID="$(tr -dc '0-9' <"$PAYSERVER_SERVICES_DIR/redis/redis.pid")"
# cpu_ticks PID: user+system CPU of the process so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
cpu_start() { CPU0=("$(cpu_ticks "$1")" "$(cpu_ticks "$MARIADB_PID")" "$(cpu_ticks "$REDIS_PID")"); }
# cpu_report LABEL PID N UNIT: CPU milliseconds per unit of each server over
# the run, printed and kept as a CPU line. MariaDB and Redis are shared with
# whatever else runs on the machine; the load generator is not counted.
cpu_report() {
  local hz
  hz="$(getconf CLK_TCK)"
  awk -v l="$1" -v p="$(($(cpu_ticks "$2") - CPU0[0]))" -v m="$(($(cpu_ticks "$MARIADB_PID") - CPU0[1]))" \
    -v r="$(($(cpu_ticks "$REDIS_PID") - CPU0[2]))" -v n="$3" -v hz="$hz" -v u="$4" -v own="$2" -v me="$$" -v out="$RESULTS" 'BEGIN {
      if (n < 1) n = 1
      if (own == me) p = 0
      k = 1000 / hz / n
      printf "  CPU ms per %s: payserver %.3f, mariadbd %.3f, redis %.3f\n", u, p * k, m * k, r * k
      printf "CPU label=%s total_ms=%.4f payserver_ms=%.4f mariadb_ms=%.4f redis_ms=%.4f\n", l, (p + m + r) * k, p * k, m * k, r * k >>out }'
}

RESULTS="$WORK/results"
: >"$RESULTS"
RUN="r$(date +%s)"

# wrk_run LABEL PORT MODE [BIZTYPE]: one bounded wrk run; keeps its RESULT line.
wrk_run() {
  local label="$1" port="$2" mode="$3" biz="${4:-BENCH}" c="$5" out pid="${PIDS[0]}"
  [[ "$port" == "$PORT_B" ]] && pid="${PIDS[1]}"
  [[ "$port" == "$PORT_C" ]] && pid="${PIDS[2]}"
  [[ "$port" == "$PORT_D" ]] && pid="${PIDS[3]}"
  cpu_start "$pid"
  out="$(timeout 120 wrk -t"$THREADS" -c"$c" -d"$DURATION" --timeout 10s -s bench/e2e/pay.lua \
    "http://$HOST:$port" -- "$label" "$mode" "$biz" "$RUN-$label")" || die "wrk $label failed: $out"
  grep -v '^RESULT ' <<<"$out" | grep -v -e '^Running' -e 'threads and' -e 'requests in' -e '^Requests/sec' -e '^Transfer/sec' -e 'Non-2xx' -e 'Thread Stats' -e 'Latency' -e 'Req/Sec' -e 'Socket errors'
  grep '^RESULT ' <<<"$out" >>"$RESULTS"
  cpu_report "$label" "$pid" "$(field "$label" requests)" request
  kill -0 "${PIDS[@]}" 2>/dev/null || die "a payserver instance died during $label"
}

SLAP_CREATE="CREATE TABLE orders ($(sed -n '/^CREATE TABLE orders (/,/^) ENGINE/p' migrations/mysql/00001_*.sql | sed '1d;$d' | tr '\n' ' ')) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci"
SLAP_QUERY="INSERT INTO orders (order_no,request_id,request_hash,biz_type,channel,merchant_id,amount,currency,subject,status,channel_trade_no,failure_code,failure_message,created_at,updated_at) VALUES (CONCAT('PS',UUID_SHORT()),CONCAT('slap-',UUID_SHORT()),'9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08','BENCH','ALIPAY','M1',1999,'CNY','','PROCESSING','','','',UTC_TIMESTAMP(6),UTC_TIMESTAMP(6))"

# The flow's own statements, one payment = 3 statements on one connection:
# the idempotency SELECT by request_id (no row: a new payment), the claim
# INSERT, the outcome UPDATE by request_id. @rid carries the requestId, in
# ascii like the column, so that the UPDATE uses the unique index.
SLAP_MIX="SELECT o.* FROM (SELECT @rid := CONVERT(CONCAT('slap-', UUID_SHORT()) USING ascii) AS k) x JOIN orders o ON o.request_id = x.k;${SLAP_QUERY/CONCAT(\'slap-\',UUID_SHORT())/@rid};UPDATE orders SET status='SUCCEEDED', channel_trade_no=CONCAT('SIM-ALIPAY-', @rid), updated_at=UTC_TIMESTAMP(6) WHERE request_id = @rid AND status IN ('PROCESSING','UNKNOWN')"

# slap_run C STATEMENTS QUERY: seconds mysqlslap took for STATEMENTS
# statements of QUERY (";"-separated) over C connections.
slap_run() {
  local out
  out="$(timeout 120 "$SLAP" --no-defaults --protocol=tcp -h "$HOST" -P "$MYSQL_PORT" -upayserver -ppayserver \
    --create-schema="$SLAP_DB" --create="$SLAP_CREATE" --query="$3" --delimiter=";" \
    --concurrency="$1" --number-of-queries="$2" --iterations=1 2>&1)" || die "mysqlslap failed: $out"
  awk '/Average number of seconds/ { print $(NF-1) }' <<<"$out"
}

# slap LABEL C STATEMENTS-PER-UNIT QUERY WHAT: mysqlslap is bounded by count,
# so a short calibration sizes the run to E2E_DURATION.
slap() {
  local label="$1" c="$2" k="$3" query="$4" what="$5" secs n rate
  secs="$(slap_run "$c" $((c * 40 * k)) "$query")"
  n="$(awk -v s="$secs" -v c="$c" -v d="${DURATION%s}" 'BEGIN { n = int(c * 40 / s * d); if (n < c * 100) n = c * 100; if (n > 3000000) n = 3000000; print n }')"
  cpu_start "$$"
  secs="$(slap_run "$c" $((n * k)) "$query")"
  rate="$(awk -v n="$n" -v s="$secs" 'BEGIN { printf "%.1f", n / s }')"
  printf '  %-34s %10s %9s\n' "run $label" "$what/s" "seconds"
  printf '  %-34s %10.0f %9.2f   (%d %s, %d connections, autocommit)\n' "" "$rate" "$secs" "$n" "$what" "$c"
  echo "RESULT label=$label requests=$n secs=$secs rps=$rate ok_rps=$rate" >>"$RESULTS"
  cpu_report "$label" "$$" "$n" "${what%s}" | sed 's/payserver [0-9.]*, //'
}

field() { # field LABEL KEY: a value from a RESULT or CPU line (0 if absent)
  awk -v l="label=$1" -v k="$2" '$2 == l { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) { print kv[2]; found = 1 } } } END { if (!found) print 0 }' "$RESULTS"
}
ratio() { # ratio NAME NUM DEN TARGET
  awk -v name="$1" -v a="$2" -v b="$3" -v t="$4" 'BEGIN {
    r = (b > 0) ? a / b : 0
    if (t == "") { printf "RATIO %s = %.2f (reported)\n", name, r; exit }
    printf "RATIO %s = %.2f (target >= %s) %s\n", name, r, t, (r >= t) ? "PASS" : "MISS" }'
}
expect_only() { # expect_only LABEL STATUS: every answer of the run had STATUS
  local total want
  total="$(field "$1" requests)"
  want="$(field "$1" "s$2")"
  [[ "$total" == "$want" ]] || die "$1: $want of $total answers were $2 (see the table above)"
}

# row LABEL C UNIT: one line of the summary table, from the RESULT and CPU lines.
row() {
  local rps p50 p99
  rps="$(field "$1" ok_rps)" # 429 runs: every answer was the 429 (expect_only)
  awk -v r="$rps" 'BEGIN { exit !(r == 0) }' && rps="$(field "$1" rps)"
  p50="$(field "$1" p50_us)" p99="$(field "$1" p99_us)"
  awk -v l="$1" -v c="$2" -v u="$3" -v rps="$rps" -v p50="$p50" -v p99="$p99" -v pm="$(field "$1" payserver_ms)" \
    -v mm="$(field "$1" mariadb_ms)" -v rm="$(field "$1" redis_ms)" 'BEGIN {
      sub(/-c[0-9]+$/, "", l)
      lat = (p50 > 0) ? sprintf("%8.2f %8.2f", p50 / 1000, p99 / 1000) : sprintf("%8s %8s", "-", "-")
      ps = (l ~ /mysqlslap/) ? "-" : sprintf("%.3f", pm)
      printf "  %-30s %4d %10.0f %-9s %s   %7s %8.3f %6.3f\n", l, c, rps, u, lat, ps, mm, rm }'
}
summary_header() {
  printf '  %-30s %4s %10s %-9s %8s %8s   %7s %8s %6s\n' run c "per s" unit "p50 ms" "p99 ms" payserver mariadbd redis
  printf '  %-30s %4s %10s %-9s %8s %8s   %s\n' "" "" "" "" "" "" "(CPU ms per unit)"
}

{
  echo "== payserver end to end: $(nproc) CPUs, $(date -u +%FT%TZ), wrk -t$THREADS, $DURATION per run"
  echo "   $(mariadb --version | sed 's/,.*//'); $(redis-server --version | cut -d' ' -f1-3); $("$GO" version | cut -d' ' -f3); $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)"
  echo "   headline MariaDB :$DURABLE_MYSQL_PORT (mariadb-durable): $DURABILITY"
  echo "   secondary MariaDB :$SHARED_MYSQL_PORT (shared test server, NOT durable): $SHARED_DURABILITY"
  echo "   payserver A :$PORT_A near-cache on, B :$PORT_B near-cache off, C :$PORT_C near-cache on, no batching (durable DB); D :$PORT_D as A on the non-durable DB"
  echo "   load average at the start $(cut -d' ' -f1-3 /proc/loadavg)"
  for c in $CONCURRENCY; do
    echo
    echo "== DURABLE, concurrency $c (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    wrk_run "unlimited-c$c" "$PORT_A" pay BENCH "$c"
    expect_only "unlimited-c$c" 200
    wrk_run "roomy-c$c" "$PORT_A" pay ROOMY "$c"
    expect_only "roomy-c$c" 200
    wrk_run "roomy-nobatching-c$c" "$PORT_C" pay ROOMY "$c"
    expect_only "roomy-nobatching-c$c" 200
    slap "mysqlslap-c$c" "$c" 1 "$SLAP_QUERY" "inserts"
    slap "mysqlslap-3stmt-c$c" "$c" 3 "$SLAP_MIX" "payments"
    wrk_run "healthz-c$c" "$PORT_A" get BENCH "$c"
    expect_only "healthz-c$c" 200
    wrk_run "full-nearcache-c$c" "$PORT_A" pay FULL "$c"
    expect_only "full-nearcache-c$c" 429
    wrk_run "full-redis-c$c" "$PORT_B" pay FULL "$c"
    expect_only "full-redis-c$c" 429
  done
  MYSQL_PORT="$SHARED_MYSQL_PORT" MARIADB_PID="$SHARED_MARIADB_PID"
  for c in $NONDURABLE_CONCURRENCY; do
    echo
    echo "== NON-DURABLE (secondary: innodb_flush_log_at_trx_commit=2, no binlog), concurrency $c (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    wrk_run "nondurable-unlimited-c$c" "$PORT_D" pay BENCH "$c"
    expect_only "nondurable-unlimited-c$c" 200
    wrk_run "nondurable-roomy-c$c" "$PORT_D" pay ROOMY "$c"
    expect_only "nondurable-roomy-c$c" 200
    slap "nondurable-mysqlslap-c$c" "$c" 1 "$SLAP_QUERY" "inserts"
  done
  echo
  echo "== summary, DURABLE MariaDB ($DURABILITY); load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
  summary_header
  for c in $CONCURRENCY; do
    row "roomy-c$c" "$c" payments
    row "mysqlslap-c$c" "$c" inserts
    row "full-nearcache-c$c" "$c" 429s
    row "healthz-c$c" "$c" requests
    row "unlimited-c$c" "$c" payments
    row "full-redis-c$c" "$c" 429s
    row "roomy-nobatching-c$c" "$c" payments
    row "mysqlslap-3stmt-c$c" "$c" payments
  done
  if [[ -n "$NONDURABLE_CONCURRENCY" ]]; then
    echo
    echo "== summary, secondary, NON-DURABLE MariaDB ($SHARED_DURABILITY)"
    summary_header
    for c in $NONDURABLE_CONCURRENCY; do
      row "nondurable-roomy-c$c" "$c" payments
      row "nondurable-mysqlslap-c$c" "$c" inserts
      row "nondurable-unlimited-c$c" "$c" payments
    done
  fi
  echo
  per() { awk -v n="$(field "$1" "$2")" -v s="$(field "$1" secs)" 'BEGIN { print (s > 0) ? n / s : 0 }'; }
  echo "== ratios, DURABLE (issue 16 targets first)"
  for c in $CONCURRENCY; do
    ratio "durable admitted/mysqlslap c=$c" "$(field "roomy-c$c" ok_rps)" "$(field "mysqlslap-c$c" rps)" 0.5
    ratio "durable rejection 429(near-cache)/healthz c=$c" "$(per "full-nearcache-c$c" s429)" "$(field "healthz-c$c" ok_rps)" 0.6
    ratio "durable limiter-overhead roomy/unlimited c=$c" "$(field "roomy-c$c" ok_rps)" "$(field "unlimited-c$c" ok_rps)" 0.95
  done
  for c in $CONCURRENCY; do
    ratio "durable rejection 429(near-cache off)/429(near-cache on) c=$c" "$(per "full-redis-c$c" s429)" "$(per "full-nearcache-c$c" s429)" ""
    ratio "durable roomy batching (coalescer + group commit)/none c=$c" "$(field "roomy-c$c" ok_rps)" "$(field "roomy-nobatching-c$c" ok_rps)" ""
    ratio "durable unlimited/mysqlslap c=$c" "$(field "unlimited-c$c" ok_rps)" "$(field "mysqlslap-c$c" rps)" ""
    ratio "durable admitted/mysqlslap-3stmt (the flow's own SELECT+INSERT+UPDATE) c=$c" "$(field "roomy-c$c" ok_rps)" "$(field "mysqlslap-3stmt-c$c" rps)" ""
    ratio "durable mysqlslap-3stmt/mysqlslap (the statement mix's own ceiling) c=$c" "$(field "mysqlslap-3stmt-c$c" rps)" "$(field "mysqlslap-c$c" rps)" ""
    # Noise-robust: the ratio if both sides were bound by the same CPUs,
    # from server CPU per unit (payserver + mariadbd + redis).
    ratio "durable cpu-bound admitted/mysqlslap c=$c" "$(field "mysqlslap-c$c" total_ms)" "$(field "roomy-c$c" total_ms)" ""
    ratio "durable cpu-bound rejection 429(near-cache)/healthz c=$c" "$(field "healthz-c$c" total_ms)" "$(field "full-nearcache-c$c" total_ms)" ""
  done
  if [[ -n "$NONDURABLE_CONCURRENCY" ]]; then
    echo
    echo "== ratios, secondary, NON-DURABLE (not the headline)"
    for c in $NONDURABLE_CONCURRENCY; do
      ratio "non-durable admitted/mysqlslap c=$c" "$(field "nondurable-roomy-c$c" ok_rps)" "$(field "nondurable-mysqlslap-c$c" rps)" ""
      ratio "non-durable limiter-overhead roomy/unlimited c=$c" "$(field "nondurable-roomy-c$c" ok_rps)" "$(field "nondurable-unlimited-c$c" ok_rps)" ""
      ratio "durable/non-durable admitted c=$c" "$(field "roomy-c$c" ok_rps)" "$(field "nondurable-roomy-c$c" ok_rps)" ""
      ratio "durable/non-durable mysqlslap c=$c" "$(field "mysqlslap-c$c" rps)" "$(field "nondurable-mysqlslap-c$c" rps)" ""
    done
  fi
  if [[ "${E2E_BATCHING:-1}" != 0 ]]; then
    echo
    echo "== limiter batching (coalescer as shipped), 64 callers"
    "$WORK/e2e" batching -addr "$HOST:16379" -callers 64 -duration 6s -rounds 6
  fi
  echo
  echo "RESULT lines:"
  cat "$RESULTS"
} 2>&1 | tee "$WORK/report"
status="${PIPESTATUS[0]}"
mkdir -p bench/out
cp "$WORK/report" "$OUT"
log "written to $OUT"
exit "$status"
