#!/usr/bin/env bash
# bench-e2e.sh — end-to-end benchmark of POST /pay on real MariaDB and Redis,
# against the machine's own ceilings, with RATIO lines measured side by side
# in one run (make bench-e2e). See docs/PERFORMANCE.md, "End-to-end".
#
# What it does:
#   1. installs wrk if missing (apt-get install -y wrk);
#   2. runs itself again under the testenv command (internal/testenv), which
#      starts, on free loopback ports, a Redis, the durable MariaDB
#      (mariadb-durable: innodb_flush_log_at_trx_commit=1, binary log on,
#      sync_binlog=1) and a MariaDB with the tests' settings
#      (innodb_flush_log_at_trx_commit=2), all of them for this run only;
#   3. builds payserver and runs three instances on a fresh database
#      (payserver_bench_e2e) on the durable MariaDB, zero-latency simulator
#      channels, log level warn: A with the near-cache on (the default), B
#      with it off, C with the near-cache on and no batching at all
#      (limiter.coalesce, dbGroupCommit and dbBatchReads false in its
#      settings file); and D, like A, on the
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
#      mysqlslap on the non-durable MariaDB, at E2E_NONDURABLE_CONCURRENCY (64);
#   6. prints a summary table (req/s, p50/p99, CPU ms per request of
#      payserver, mariadbd and redis-server) and the RATIO lines, the
#      end-to-end targets first; then limiter checks/s at 64 callers, plain
#      client vs the coalescer as shipped (bench/e2e batching).
# The report starts and ends with the conditions (bench/benchenv: commit,
# machine, load average, what else ran) and is also written to E2E_OUT
# (bench/out/e2e.txt). A ratio under target prints
# MISS and does not fail the run; an error (a server down, a wrong status)
# does.
#
# Knobs: E2E_DURATION (10s), E2E_CONCURRENCY ("50 64 200"; "" skips step 4
# and leaves out instances B and C, which serve only it), E2E_THREADS (2),
# E2E_NONDURABLE_CONCURRENCY ("64"; "" skips step 5), E2E_BATCHING (1; 0
# skips the limiter batching part of step 6),
# E2E_PORT (18090: A; B, C and D are E2E_PORT+1, +2 and +3),
# E2E_BASELINE (a git revision, e.g. main; empty: none): builds that
#   revision's payserver too (git archive, so no worktree is touched) and
#   runs it as instance E (E2E_PORT+4, like A) beside A: base-roomy right
#   after roomy and base-full-nearcache right after full-nearcache, so the
#   before/after ratios are side by side in one run,
# E2E_SCALE (e.g. "1 2 3"; empty: skipped): throughput of 1, 2 and 3
#   instances like A (E2E_PORT, +5, +6) on the same durable MariaDB and
#   Redis, E2E_SCALE_CONCURRENCY (64) connections in all, split evenly over
#   one wrk per instance, on ROOMY (make bench-scale runs this alone:
#   E2E_SCALE="1 2 3" E2E_CONCURRENCY= E2E_NONDURABLE_CONCURRENCY=
#   E2E_BATCHING=0),
# E2E_OUT (bench/out/e2e.txt): where the report is written.
# E2E_ROUNDS (1): rounds of the headline runs at each concurrency, in
#   alternating order (unlimited, roomy, mysqlslap, healthz, full-nearcache,
#   then reversed), so that each target's two sides run next to each other;
#   each ratio is printed per round and as the median of the rounds.
# E2E_LOG_ROUNDS (3; 0 skips): rounds of the decision log's side by side:
#   instance G is A with the decision log off
#   (PAYSERVER_DECISION_LOG_RETENTION=0); each round runs roomy and then
#   full on A and G, in alternating order, at E2E_AB_CONCURRENCY (64), and
#   the RATIO lines give server CPU per admitted payment and per 429 with
#   the log off over with it on (target >= 0.95: the log adds at most 5%).
# E2E_F_CONFIG ("dbMaxBatch: 16") and E2E_F_ENV (""): with E2E_BASELINE,
#   instance F is this build with these settings added (lines of its
#   settings file, and space-separated NAME=VALUE variables), run in the A/B
#   rounds beside A: the side-by-side check of a setting.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO="${GO:-go}"
NONDURABLE_CONCURRENCY="${E2E_NONDURABLE_CONCURRENCY-64}"
SERVICES=redis,mariadb-durable
[[ -z "$NONDURABLE_CONCURRENCY" ]] || SERVICES+=,mariadb
[[ -n "${PAYSERVER_TEST_MYSQL_DURABLE_ADDR:-}" ]] ||
  exec "$GO" run ./internal/testenv/cmd/testenv -services "$SERVICES" -- "scripts/$(basename "$0")" "$@"
DURATION="${E2E_DURATION:-10s}"
CONCURRENCY="${E2E_CONCURRENCY-50 64 200}"
THREADS="${E2E_THREADS:-2}"
PORT_A="${E2E_PORT:-18090}"
PORT_B=$((PORT_A + 1))
PORT_C=$((PORT_A + 2))
PORT_D=$((PORT_A + 3))
PORT_E=$((PORT_A + 4))
PORT_F=$((PORT_A + 7))
PORT_G=$((PORT_A + 8))
ROUNDS="${E2E_ROUNDS:-1}"
AB_ROUNDS="${E2E_AB_ROUNDS:-3}"
for v in ROUNDS AB_ROUNDS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "bench-e2e: E2E_$v must be a whole number of at least 1, not '${!v}'" >&2; exit 2; }
done
LOG_ROUNDS="${E2E_LOG_ROUNDS:-3}"
[[ "$LOG_ROUNDS" =~ ^[0-9]+$ ]] || { echo "bench-e2e: E2E_LOG_ROUNDS must be a whole number, not '$LOG_ROUNDS'" >&2; exit 2; }
AB_C="${E2E_AB_CONCURRENCY:-64}"
BASELINE="${E2E_BASELINE:-}"
SCALE="${E2E_SCALE:-}"
SCALE_C="${E2E_SCALE_CONCURRENCY:-64}"
F_CONFIG="${E2E_F_CONFIG-dbMaxBatch: 16}"
F_ENV="${E2E_F_ENV:-}"
F_DESC="$F_CONFIG${F_ENV:+ $F_ENV}"
DURABLE_MYSQL_PORT="${PAYSERVER_TEST_MYSQL_DURABLE_ADDR##*:}"
SHARED_MYSQL_PORT="${PAYSERVER_TEST_MYSQL_ADDR:-}"
SHARED_MYSQL_PORT="${SHARED_MYSQL_PORT##*:}"
REDIS_PORT="${PAYSERVER_TEST_REDIS_ADDR##*:}"
MYSQL_PORT="$DURABLE_MYSQL_PORT"
DB=payserver_bench_e2e
SLAP_DB=payserver_bench_slap
HOST=127.0.0.1
OUT="${E2E_OUT:-bench/out/e2e.txt}"

log() { echo "bench-e2e: $*" >&2; }
die() { echo "bench-e2e: FAIL: $*" >&2; exit 1; }
[[ -z "$NONDURABLE_CONCURRENCY" || -n "$SHARED_MYSQL_PORT" ]] ||
  die "E2E_NONDURABLE_CONCURRENCY needs the tests' MariaDB (PAYSERVER_TEST_MYSQL_ADDR: testenv -services ...,mariadb)"

scripts/install-wrk.sh || die "wrk is missing and could not be installed"
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
"$GO" build -o "$WORK/benchenv" ./bench/benchenv/cmd/benchenv
BASELINE_DESC=""
if [[ -n "$BASELINE" ]]; then
  BASELINE_DESC="$(git rev-parse --short "$BASELINE") ($(git log -1 --format=%s "$BASELINE" | cut -c1-60))"
  log "building the baseline payserver at $BASELINE_DESC"
  mkdir -p "$WORK/base"
  git archive "$BASELINE" | tar -x -C "$WORK/base"
  (cd "$WORK/base" && "$GO" build -o "$WORK/payserver-base" ./cmd/payserver)
fi

for p in "$DURABLE_MYSQL_PORT" ${NONDURABLE_CONCURRENCY:+"$SHARED_MYSQL_PORT"}; do
  sql "$p" "DROP DATABASE IF EXISTS $DB; CREATE DATABASE $DB CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
done
DURABILITY="$(sql "$DURABLE_MYSQL_PORT" 'SELECT CONCAT("innodb_flush_log_at_trx_commit=", @@innodb_flush_log_at_trx_commit, ", log_bin=", @@log_bin, ", sync_binlog=", @@sync_binlog)')"
[[ "$DURABILITY" == "innodb_flush_log_at_trx_commit=1, log_bin=ON, sync_binlog=1" ]] ||
  die "the durable MariaDB on $DURABLE_MYSQL_PORT is not durable: $DURABILITY"
SHARED_DURABILITY="not used"
[[ -z "$NONDURABLE_CONCURRENCY" ]] ||
  SHARED_DURABILITY="$(sql "$SHARED_MYSQL_PORT" 'SELECT CONCAT("innodb_flush_log_at_trx_commit=", @@innodb_flush_log_at_trx_commit, ", log_bin=", @@log_bin, ", sync_binlog=", @@sync_binlog)')"
# The limiter's keys: payserver:rl:{CHANNEL}:BIZTYPE:… now, and
# payserver:rl:{BIZTYPE:CHANNEL}:… before (a baseline may be older).
for k in '{ALIPAY}:BENCH' '{ALIPAY}:ROOMY' '{ALIPAY}:FULL' '{BENCH:ALIPAY}' '{ROOMY:ALIPAY}' '{FULL:ALIPAY}'; do
  redis-cli -h "$HOST" -p "$REDIS_PORT" --scan --pattern "payserver:rl:$k:*" | xargs -r redis-cli -h "$HOST" -p "$REDIS_PORT" del >/dev/null
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

declare -A PORT_PID # port -> payserver pid
# start_server NAME PORT NEARCACHE BATCHING MYSQL_PORT [BINARY]
start_server() {
  local name="$1" port="$2" nc="$3" batching="$4" mport="$5" bin="${6:-$WORK/payserver}"
  # Each instance's settings file: the shared one plus its "off" switches
  # (settings file only) and, for F, E2E_F_CONFIG.
  local cfg="$WORK/payserver-$name.yaml"
  cp "$WORK/payserver.yaml" "$cfg"
  [[ "$nc" == true && "$batching" == true ]] || echo "limiter: {nearCache: $nc, coalesce: $batching}" >>"$cfg"
  [[ "$batching" == true ]] || printf 'dbGroupCommit: false\ndbBatchReads: false\n' >>"$cfg"
  [[ "$name" != f || -z "$F_CONFIG" ]] || printf '%s\n' "$F_CONFIG" >>"$cfg"
  (
    export PAYSERVER_CONFIG="$cfg" PAYSERVER_HTTP_ADDR="$HOST:$port"
    export PAYSERVER_DATA_DIR="$WORK/data-$name" PAYSERVER_LIMITS_FILE="$WORK/limits.yaml"
    export PAYSERVER_MYSQL_DSN="payserver:payserver@tcp($HOST:$mport)/$DB?parseTime=true&loc=UTC"
    export PAYSERVER_AUTO_MIGRATE=true PAYSERVER_REDIS_ADDR="$HOST:$REDIS_PORT"
    export PAYSERVER_LOG_LEVEL=warn
    # A loaded machine should show as latency, not as degraded (local)
    # decisions: this measures throughput, not the outage policy.
    export PAYSERVER_LIMITER_TIMEOUT=1s
    if [[ "$name" == f && -n "$F_ENV" ]]; then
      # shellcheck disable=SC2086 # NAME=VALUE words
      export $F_ENV
    fi
    [[ "$name" != g ]] || export PAYSERVER_DECISION_LOG_RETENTION=0
    exec "$bin"
  ) >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  PORT_PID[$port]=$!
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
if [[ -n "$CONCURRENCY" ]]; then # B and C serve the secondary runs only
  start_server b "$PORT_B" false true "$DURABLE_MYSQL_PORT"
  start_server c "$PORT_C" true false "$DURABLE_MYSQL_PORT" # no batching
fi
[[ -z "$NONDURABLE_CONCURRENCY" ]] || start_server d "$PORT_D" true true "$SHARED_MYSQL_PORT"
if [[ -n "$BASELINE" ]]; then
  start_server e "$PORT_E" true true "$DURABLE_MYSQL_PORT" "$WORK/payserver-base"
  start_server f "$PORT_F" true true "$DURABLE_MYSQL_PORT" # this build with $F_DESC
fi
((LOG_ROUNDS == 0)) || start_server g "$PORT_G" true true "$DURABLE_MYSQL_PORT" # A with the decision log off
if [[ -n "$SCALE" ]]; then
  start_server a2 $((PORT_A + 5)) true true "$DURABLE_MYSQL_PORT"
  start_server a3 $((PORT_A + 6)) true true "$DURABLE_MYSQL_PORT"
fi

# Fill FULL:ALIPAY (1 per hour) with one admitted payment.
code="$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$HOST:$PORT_A/pay" -H 'Content-Type: application/json' \
  -d '{"requestId":"e2e-fill-'"$$"'","bizType":"FULL","channel":"ALIPAY","merchantId":"M1","amount":1999,"currency":"CNY"}')"
[[ "$code" == 200 ]] || die "filling FULL:ALIPAY answered $code"
if [[ -n "$BASELINE" ]]; then
  # A baseline with another key layout has windows of its own to fill (one
  # with the same layout answers 429: already full).
  code="$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$HOST:$PORT_E/pay" -H 'Content-Type: application/json' \
    -d '{"requestId":"e2e-fill-base-'"$$"'","bizType":"FULL","channel":"ALIPAY","merchantId":"M1","amount":1999,"currency":"CNY"}')"
  [[ "$code" == 200 || "$code" == 429 ]] || die "filling FULL:ALIPAY through the baseline answered $code"
fi

DURABLE_MARIADB_PID="$PAYSERVER_TEST_MYSQL_DURABLE_PID"
SHARED_MARIADB_PID="${PAYSERVER_TEST_MYSQL_PID:-}"
MARIADB_PID="$DURABLE_MARIADB_PID" # the server of the runs in progress (and MYSQL_PORT)
REDIS_PID="$PAYSERVER_TEST_REDIS_PID"
# cpu_ticks PID: user+system CPU of the process so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
cpu_start() { CPU0=("$(cpu_ticks "$1")" "$(cpu_ticks "$MARIADB_PID")" "$(cpu_ticks "$REDIS_PID")"); }
# cpu_report LABEL PID N UNIT: CPU milliseconds per unit of each server over
# the run, printed and kept as a CPU line. MariaDB and Redis are this run's
# own; the load generator is not counted.
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

# db_start / db_report N: the server's statements, row lock waits and
# deadlocks over a run, per 1000 requests (SHOW GLOBAL STATUS deltas; on the
# durable server nothing else runs, so they are exact).
DB_VARS="Com_select Com_insert Com_update Com_commit Innodb_row_lock_waits Innodb_row_lock_time Innodb_deadlocks"
db_status() {
  sql "$MYSQL_PORT" "SHOW GLOBAL STATUS WHERE Variable_name IN ('${DB_VARS// /\',\'}')" | sort
}
db_start() { DB0="$(db_status)"; }
db_report() {
  join <(echo "$DB0") <(db_status) | awk -v n="$1" 'BEGIN { if (n < 1) n = 1 } {
      d[$1] = $3 - $2 } END {
      printf "  DB per 1000 requests: SELECT %.0f, INSERT %.0f, UPDATE %.0f, COMMIT %.0f; row lock waits %.1f (%.0f ms in all), deadlocks %d\n",
        d["Com_select"] * 1000 / n, d["Com_insert"] * 1000 / n, d["Com_update"] * 1000 / n, d["Com_commit"] * 1000 / n,
        d["Innodb_row_lock_waits"] * 1000 / n, d["Innodb_row_lock_time"], d["Innodb_deadlocks"] }'
}

# stage_start PORT / stage_report LABEL PORT: from the instance's own
# /metrics, over the run: the mean /pay latency and, per POST /pay, the time
# spent in the limiter check (the coalescing wait included) and in the order
# store's reads, claims and outcomes (each stage's total time over the
# number of payments, so the stages add up whatever calls a payment made),
# and the checks decided per Redis script call (the coalescer's mean batch);
# kept as a STAGE line. A build without a stage's histogram (an older
# baseline) prints n/a for it and for the rest.
STAGE_SERIES='payserver_http_request_seconds_(sum|count)\{route="/pay"\}|payserver_limiter_check_seconds_(sum|count)|payserver_limiter_redis_(calls|checks)_total|payserver_order_store_seconds_(sum|count)\{(kind|op)="[a-z]+"\}'
stage_snapshot() {
  { curl -s -m 5 "http://$HOST:$1/metrics" || true; } | grep -E "^($STAGE_SERIES) " |
    sed -e 's/{route="\/pay"}//' -e 's/^payserver_order_store_seconds_\([a-z]*\){[a-z]*="\([a-z]*\)"}/payserver_order_\2_seconds_\1/' | sort || true
}
stage_start() { STAGE0="$(stage_snapshot "$1")"; }
stage_report() {
  join -a 2 -e 0 -o 0,1.2,2.2 <(echo "$STAGE0") <(stage_snapshot "$2") | awk -v l="$1" -v out="$RESULTS" '{ d[$1] = $3 - $2; seen[$1] = 1 } END {
      n = d["payserver_http_request_seconds_count"]
      pay = n > 0 ? d["payserver_http_request_seconds_sum"] * 1000 / n : 0
      per = d["payserver_limiter_redis_calls_total"] > 0 ? d["payserver_limiter_redis_checks_total"] / d["payserver_limiter_redis_calls_total"] : 0
      k = split("check get create finish", st, " ")
      name["check"] = "payserver_limiter_check_seconds_sum"
      rest = pay
      line = ""
      for (i = 1; i <= k; i++) {
        m = (st[i] in name) ? name[st[i]] : "payserver_order_" st[i] "_seconds_sum"
        if (!(m in seen)) { v[st[i]] = "n/a"; rest = "n/a"; continue }
        v[st[i]] = sprintf("%.4f", n > 0 ? d[m] * 1000 / n : 0)
        if (rest != "n/a") rest -= v[st[i]]
      }
      if (rest != "n/a") rest = sprintf("%.4f", rest)
      printf "  stages: /pay mean %.2f ms = lookup %s + limiter check %s + claim %s + outcome %s + the rest %s (HTTP, channel call), per payment; %.1f checks per Redis script call\n", pay, v["get"], v["check"], v["create"], v["finish"], rest, per
      printf "STAGE label=%s pay_ms=%.4f check_ms=%s get_ms=%s create_ms=%s finish_ms=%s rest_ms=%s checks_per_call=%.2f\n", l, pay, v["check"], v["get"], v["create"], v["finish"], rest, per >>out }'
}

RESULTS="$WORK/results"
: >"$RESULTS"
RUN="r$(date +%s)"

# wrk_run LABEL PORT MODE [BIZTYPE]: one bounded wrk run; keeps its RESULT line.
wrk_run() {
  local label="$1" port="$2" mode="$3" biz="${4:-BENCH}" c="$5" out pid="${PORT_PID[$2]}"
  cpu_start "$pid"
  db_start
  [[ "$mode" != pay ]] || stage_start "$port"
  out="$(timeout 120 wrk -t"$THREADS" -c"$c" -d"$DURATION" --timeout 10s -s bench/e2e/pay.lua \
    "http://$HOST:$port" -- "$label" "$mode" "$biz" "$RUN-$label")" || die "wrk $label failed: $out"
  grep -v '^RESULT ' <<<"$out" | grep -v -e '^Running' -e 'threads and' -e 'requests in' -e '^Requests/sec' -e '^Transfer/sec' -e 'Non-2xx' -e 'Thread Stats' -e 'Latency' -e 'Req/Sec' -e 'Socket errors'
  grep '^RESULT ' <<<"$out" >>"$RESULTS" || die "wrk $label printed no RESULT line: $out"
  cpu_report "$label" "$pid" "$(field "$label" requests)" request
  db_report "$(field "$label" requests)"
  [[ "$mode" != pay ]] || stage_report "$label" "$port"
  kill -0 "${PIDS[@]}" 2>/dev/null || die "a payserver instance died during $label"
}

# scale_run N C: C connections over N instances like A (one wrk each, C/N
# connections), ROOMY, at once; keeps one RESULT line (summed requests,
# the slowest wrk's seconds, the worst p50/p99) and one CPU line (the N
# payserver processes summed).
scale_run() {
  local n="$1" c="$2" label="scale-$1-c$2" ports=() wrks=() i p t0 t1 m0 m1 r0 r1 hz
  ports=("$PORT_A" $((PORT_A + 5)) $((PORT_A + 6)))
  t0=0
  for ((i = 0; i < n; i++)); do t0=$((t0 + $(cpu_ticks "${PORT_PID[${ports[$i]}]}"))); done
  m0="$(cpu_ticks "$MARIADB_PID")" r0="$(cpu_ticks "$REDIS_PID")"
  for ((i = 0; i < n; i++)); do
    timeout 120 wrk -t1 -c$((c / n)) -d"$DURATION" --timeout 10s -s bench/e2e/pay.lua \
      "http://$HOST:${ports[$i]}" -- "$label" pay ROOMY "$RUN-$label-$i" >"$WORK/$label-$i.out" &
    wrks+=($!)
  done
  for p in "${wrks[@]}"; do wait "$p" || die "wrk $label failed: $(cat "$WORK/$label"-*.out)"; done
  t1=0
  for ((i = 0; i < n; i++)); do t1=$((t1 + $(cpu_ticks "${PORT_PID[${ports[$i]}]}"))); done
  m1="$(cpu_ticks "$MARIADB_PID")" r1="$(cpu_ticks "$REDIS_PID")"
  hz="$(getconf CLK_TCK)"
  cat "$WORK/$label"-*.out | grep '^RESULT ' | awk -v l="$label" -v n="$n" -v p=$((t1 - t0)) -v m=$((m1 - m0)) -v r=$((r1 - r0)) -v hz="$hz" -v out="$RESULTS" '{
      for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      req += v["requests"]; ok += v["ok"]; if (v["secs"] > secs) secs = v["secs"]
      if (v["p50_us"] > p50) p50 = v["p50_us"]; if (v["p99_us"] > p99) p99 = v["p99_us"]
    } END {
      k = 1000 / hz / (ok > 0 ? ok : 1)
      printf "  run %-30s %d instances: %.0f payments/s (p50 %.2f ms, p99 %.2f ms, the worst instance), %d of %d answers 200\n", l, n, ok / secs, p50 / 1000, p99 / 1000, ok, req
      printf "  CPU ms per payment: payserver %.3f (all instances), mariadbd %.3f, redis %.3f\n", p * k, m * k, r * k
      printf "RESULT label=%s requests=%d secs=%.3f rps=%.1f ok_rps=%.1f p50_us=%d p99_us=%d ok=%d s200=%d\n", l, req, secs, req / secs, ok / secs, p50, p99, ok, ok >>out
      printf "CPU label=%s total_ms=%.4f payserver_ms=%.4f mariadb_ms=%.4f redis_ms=%.4f\n", l, (p + m + r) * k, p * k, m * k, r * k >>out
    }'
  expect_only "$label" 200
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
  [[ "$total" != 0 ]] || die "$1: no answers recorded (see the table above)"
  [[ "$total" == "$want" ]] || die "$1: $want of $total answers were $2 (see the table above)"
}

# rounds_ratio ROUNDS NAME TARGET NUM-LABEL NUM-KEY DEN-LABEL DEN-KEY: the
# ratio in each round (labels with R for the round) and their median; a
# round without its figures (n/a) is left out of the median.
rounds_ratio() {
  local n="$1" name="$2" t="$3" r vals=()
  for ((r = 1; r <= n; r++)); do
    vals+=("$(awk -v a="$(field "${4//R/r$r}" "$5")" -v b="$(field "${6//R/r$r}" "$7")" 'BEGIN { if (a ~ /^[0-9.e+-]+$/ && b + 0 > 0) printf "%.2f", a / b; else printf "n/a" }')")
  done
  printf '%s\n' "${vals[@]}" | { grep -v '^n/a$' || true; } | sort -n | awk -v name="$name" -v t="$t" -v all="${vals[*]}" '{ v[NR] = $1 } END {
    gsub(/ /, ", ", all)
    if (NR == 0) { printf "RATIO %s = n/a (no round has its figures: %s)\n", name, all; exit }
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    of = (split(all, each, ", ") > 1) ? sprintf(" (median of rounds: %s)", all) : ""
    if (t == "") printf "RATIO %s = %.2f (reported)%s\n", name, m, of
    else printf "RATIO %s = %.2f (target >= %s) %s%s\n", name, m, t, (m >= t) ? "PASS" : "MISS", of }'
}
ab_ratio() { rounds_ratio "$AB_ROUNDS" "$@"; }
hl_ratio() { rounds_ratio "$ROUNDS" "$@"; }

# headline_run RUN C ROUND: one of the headline runs, labelled RUN-cC-rROUND.
headline_run() {
  local l="$1-c$2-r$3"
  case "$1" in
  # One command per line: on the left of && a function runs without set -e.
  unlimited)
    wrk_run "$l" "$PORT_A" pay BENCH "$2"
    expect_only "$l" 200
    ;;
  roomy)
    wrk_run "$l" "$PORT_A" pay ROOMY "$2"
    expect_only "$l" 200
    ;;
  mysqlslap) slap "$l" "$2" 1 "$SLAP_QUERY" inserts ;;
  healthz)
    wrk_run "$l" "$PORT_A" get BENCH "$2"
    expect_only "$l" 200
    ;;
  full-nearcache)
    wrk_run "$l" "$PORT_A" pay FULL "$2"
    expect_only "$l" 429
    ;;
  *) die "no headline run $1" ;;
  esac
}

# stage_gaps C: per round, how much longer a roomy payment took than an
# unlimited one, against the roomy payment's own limiter check.
stage_gaps() {
  local r
  for ((r = 1; r <= ROUNDS; r++)); do
    awk -v c="$1" -v r="$r" -v rp="$(field "roomy-c$1-r$r" pay_ms)" -v up="$(field "unlimited-c$1-r$r" pay_ms)" \
      -v rc="$(field "roomy-c$1-r$r" check_ms)" -v uc="$(field "unlimited-c$1-r$r" check_ms)" \
      -v b="$(field "roomy-c$1-r$r" checks_per_call)" 'BEGIN {
        printf "STAGES c=%d round %d: mean /pay roomy %.2f ms, unlimited %.2f ms, difference %.2f ms; limiter check roomy %.2f ms (%.1f checks per Redis call), unlimited %.2f ms\n", c, r, rp, up, rp - up, rc, b, uc }'
    for s in get create finish rest; do
      awk -v c="$1" -v r="$r" -v s="$s" -v a="$(field "roomy-c$1-r$r" "${s}_ms")" -v b="$(field "unlimited-c$1-r$r" "${s}_ms")" 'BEGIN {
        printf "STAGES c=%d round %d:   %-6s roomy %.2f ms, unlimited %.2f ms, difference %.2f ms\n", c, r, s, a, b, a - b }'
    done
  done
}
ab_ratios() {
  summary_header
  local r i
  for ((r = 1; r <= AB_ROUNDS; r++)); do
    for i in a e f; do row "ab-roomy-$i-r$r" "$AB_C" payments; done
    row "ab-healthz-a-r$r" "$AB_C" requests
    for i in a e; do row "ab-full-$i-r$r" "$AB_C" 429s; done
  done
  ab_ratio "A/B this/baseline admitted payments/s c=$AB_C" "" ab-roomy-a-R ok_rps ab-roomy-e-R ok_rps
  ab_ratio "A/B this/baseline 429/s c=$AB_C" "" ab-full-a-R rps ab-full-e-R rps
  ab_ratio "A/B this rejection 429/healthz c=$AB_C" 0.6 ab-full-a-R rps ab-healthz-a-R ok_rps
  ab_ratio "A/B baseline rejection 429/healthz c=$AB_C" 0.6 ab-full-e-R rps ab-healthz-a-R ok_rps
  ab_ratio "A/B $F_DESC/default (this build, F/A) admitted payments/s c=$AB_C" "" ab-roomy-f-R ok_rps ab-roomy-a-R ok_rps
  ab_ratio "A/B cpu-bound this/baseline admitted (server CPU per payment, E/A) c=$AB_C" "" ab-roomy-e-R total_ms ab-roomy-a-R total_ms
  ab_ratio "A/B cpu-bound this/baseline 429 (server CPU per 429, E/A) c=$AB_C" "" ab-full-e-R total_ms ab-full-a-R total_ms
  ab_ratio "A/B cpu-bound $F_DESC/default admitted (server CPU per payment, A/F) c=$AB_C" "" ab-roomy-a-R total_ms ab-roomy-f-R total_ms
  ab_ratio "A/B limiter check latency $F_DESC/default (F/A) c=$AB_C" "" ab-roomy-f-R check_ms ab-roomy-a-R check_ms
  ab_ratio "A/B payserver CPU per 429, baseline/this (E/A) c=$AB_C" "" ab-full-e-R payserver_ms ab-full-a-R payserver_ms
}

# row LABEL C UNIT: one line of the summary table, from the RESULT and CPU lines.
row() {
  local rps p50 p99
  rps="$(field "$1" ok_rps)" # 429 runs: every answer was the 429 (expect_only)
  awk -v r="$rps" 'BEGIN { exit !(r == 0) }' && rps="$(field "$1" rps)"
  p50="$(field "$1" p50_us)" p99="$(field "$1" p99_us)"
  awk -v l="$1" -v c="$2" -v u="$3" -v rps="$rps" -v p50="$p50" -v p99="$p99" -v pm="$(field "$1" payserver_ms)" \
    -v mm="$(field "$1" mariadb_ms)" -v rm="$(field "$1" redis_ms)" 'BEGIN {
      sub(/-c[0-9]+/, "", l)
      lat = (p50 > 0) ? sprintf("%8.2f %8.2f", p50 / 1000, p99 / 1000) : sprintf("%8s %8s", "-", "-")
      ps = (l ~ /mysqlslap/) ? "-" : sprintf("%.3f", pm)
      printf "  %-30s %4d %10.0f %-9s %s   %7s %8.3f %6.3f\n", l, c, rps, u, lat, ps, mm, rm }'
}
summary_header() {
  printf '  %-30s %4s %10s %-9s %8s %8s   %7s %8s %6s\n' run c "per s" unit "p50 ms" "p99 ms" payserver mariadbd redis
  printf '  %-30s %4s %10s %-9s %8s %8s   %s\n' "" "" "" "" "" "" "(CPU ms per unit)"
}

{
  "$WORK/benchenv" begin -state "$WORK/benchenv.json" -title "payserver end to end (scripts/bench-e2e.sh): wrk -t$THREADS, $DURATION per run"
  echo "   $(mariadb --version | sed 's/,.*//'); $(redis-server --version | cut -d' ' -f1-3); $("$GO" version | cut -d' ' -f3); $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)"
  echo "   headline MariaDB :$DURABLE_MYSQL_PORT (mariadb-durable): $DURABILITY"
  [[ -z "$NONDURABLE_CONCURRENCY" ]] || echo "   secondary MariaDB :$SHARED_MYSQL_PORT (the tests' settings, NOT durable): $SHARED_DURABILITY"
  if [[ -n "$CONCURRENCY" ]]; then
    echo "   payserver A :$PORT_A near-cache on, B :$PORT_B near-cache off, C :$PORT_C near-cache on, no batching (durable DB)"
  else
    echo "   payserver A :$PORT_A near-cache on (durable DB)"
  fi
  [[ -z "$NONDURABLE_CONCURRENCY" ]] || echo "   payserver D :$PORT_D as A on the non-durable DB"
  [[ -z "$SCALE" ]] || echo "   payserver A2 :$((PORT_A + 5)) and A3 :$((PORT_A + 6)) as A, for the instances runs"
  ((LOG_ROUNDS == 0)) || echo "   payserver G :$PORT_G as A with the decision log off (PAYSERVER_DECISION_LOG_RETENTION=0)"
  [[ -z "$BASELINE" ]] || echo "   payserver E :$PORT_E as A, built from the baseline $BASELINE = $BASELINE_DESC; F :$PORT_F this build with $F_DESC"
  for c in $CONCURRENCY; do
    for ((r = 1; r <= ROUNDS; r++)); do
      echo
      echo "== DURABLE, concurrency $c, round $r of $ROUNDS (load average $(cut -d' ' -f1-3 /proc/loadavg))"
      runs=(unlimited roomy mysqlslap healthz full-nearcache)
      ((r % 2 == 0)) && runs=(full-nearcache healthz mysqlslap roomy unlimited)
      for run in "${runs[@]}"; do headline_run "$run" "$c" "$r"; done
    done
    echo
    echo "== DURABLE, concurrency $c, the secondary runs (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    wrk_run "roomy-nobatching-c$c" "$PORT_C" pay ROOMY "$c"
    expect_only "roomy-nobatching-c$c" 200
    slap "mysqlslap-3stmt-c$c" "$c" 3 "$SLAP_MIX" "payments"
    wrk_run "full-redis-c$c" "$PORT_B" pay FULL "$c"
    expect_only "full-redis-c$c" 429
  done
  if [[ -n "$BASELINE" ]]; then
    for ((r = 1; r <= AB_ROUNDS; r++)); do
      echo
      echo "== A/B round $r of $AB_ROUNDS, c=$AB_C (load average $(cut -d' ' -f1-3 /proc/loadavg))"
      order=(a e f)
      ((r % 2 == 0)) && order=(f e a)
      for i in "${order[@]}"; do
        port="$PORT_A"
        [[ "$i" == e ]] && port="$PORT_E"
        [[ "$i" == f ]] && port="$PORT_F"
        wrk_run "ab-roomy-$i-r$r" "$port" pay ROOMY "$AB_C"
        expect_only "ab-roomy-$i-r$r" 200
      done
      wrk_run "ab-healthz-a-r$r" "$PORT_A" get BENCH "$AB_C"
      expect_only "ab-healthz-a-r$r" 200
      for i in "${order[@]}"; do
        [[ "$i" == f ]] && continue
        port="$PORT_A"
        [[ "$i" == e ]] && port="$PORT_E"
        wrk_run "ab-full-$i-r$r" "$port" pay FULL "$AB_C"
        expect_only "ab-full-$i-r$r" 429
      done
    done
  fi
  for ((r = 1; r <= LOG_ROUNDS; r++)); do
    echo
    echo "== decision log on (A) and off (G), round $r of $LOG_ROUNDS, c=$AB_C (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    order=(a g)
    ((r % 2 == 0)) && order=(g a)
    for run in roomy full; do
      for i in "${order[@]}"; do
        port="$PORT_A"
        [[ "$i" == g ]] && port="$PORT_G"
        if [[ "$run" == roomy ]]; then
          wrk_run "log-roomy-$i-r$r" "$port" pay ROOMY "$AB_C"
          expect_only "log-roomy-$i-r$r" 200
        else
          wrk_run "log-full-$i-r$r" "$port" pay FULL "$AB_C"
          expect_only "log-full-$i-r$r" 429
        fi
      done
    done
  done
  if [[ -n "$SCALE" ]]; then
    echo
    echo "== DURABLE, instances: $SCALE, $SCALE_C connections in all (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    for n in $SCALE; do scale_run "$n" "$SCALE_C"; done
  fi
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
    for ((r = 1; r <= ROUNDS; r++)); do
      row "roomy-c$c-r$r" "$c" payments
      row "mysqlslap-c$c-r$r" "$c" inserts
      row "full-nearcache-c$c-r$r" "$c" 429s
      row "healthz-c$c-r$r" "$c" requests
      row "unlimited-c$c-r$r" "$c" payments
    done
    row "full-redis-c$c" "$c" 429s
    row "roomy-nobatching-c$c" "$c" payments
    row "mysqlslap-3stmt-c$c" "$c" payments
  done
  for n in $SCALE; do row "scale-$n-c$SCALE_C" "$SCALE_C" payments; done
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
  echo "== ratios, DURABLE (the end-to-end targets first)"
  for c in $CONCURRENCY; do
    hl_ratio "durable admitted/mysqlslap c=$c" 0.5 "roomy-c$c-R" ok_rps "mysqlslap-c$c-R" rps
    # The full-nearcache runs answered only 429s (expect_only): rps is 429/s.
    hl_ratio "durable rejection 429(near-cache)/healthz c=$c" 0.6 "full-nearcache-c$c-R" rps "healthz-c$c-R" ok_rps
    hl_ratio "durable limiter-overhead roomy/unlimited c=$c" 0.95 "roomy-c$c-R" ok_rps "unlimited-c$c-R" ok_rps
  done
  if [[ -n "$BASELINE" ]]; then
    echo
    echo "== A/B on DURABLE MariaDB, c=$AB_C, $AB_ROUNDS interleaved rounds: this build (A) against the baseline $BASELINE_DESC (E) and this build with $F_DESC (F)"
    ab_ratios
  fi
  if ((LOG_ROUNDS > 0)); then
    echo
    echo "== the decision log, on (A) and off (G), DURABLE MariaDB, c=$AB_C, $LOG_ROUNDS interleaved rounds"
    summary_header
    for ((r = 1; r <= LOG_ROUNDS; r++)); do
      for i in a g; do row "log-roomy-$i-r$r" "$AB_C" payments; done
      for i in a g; do row "log-full-$i-r$r" "$AB_C" 429s; done
    done
    # Server CPU (payserver + mariadbd + redis): the log's own inserts are
    # mariadbd's work, so they count.
    rounds_ratio "$LOG_ROUNDS" "decision log off/on, server CPU per admitted payment (G/A) c=$AB_C" 0.95 log-roomy-g-R total_ms log-roomy-a-R total_ms
    rounds_ratio "$LOG_ROUNDS" "decision log off/on, server CPU per 429 (G/A) c=$AB_C" 0.95 log-full-g-R total_ms log-full-a-R total_ms
    rounds_ratio "$LOG_ROUNDS" "decision log off/on, payserver CPU per admitted payment (G/A) c=$AB_C" "" log-roomy-g-R payserver_ms log-roomy-a-R payserver_ms
    rounds_ratio "$LOG_ROUNDS" "decision log off/on, payserver CPU per 429 (G/A) c=$AB_C" "" log-full-g-R payserver_ms log-full-a-R payserver_ms
    rounds_ratio "$LOG_ROUNDS" "decision log off/on, mariadbd CPU per 429 (G/A) c=$AB_C" "" log-full-g-R mariadb_ms log-full-a-R mariadb_ms
    rounds_ratio "$LOG_ROUNDS" "decision log on/off, admitted payments/s (A/G) c=$AB_C" "" log-roomy-a-R ok_rps log-roomy-g-R ok_rps
  fi
  for n in $SCALE; do
    ratio "durable scale $n instances/1 instance c=$SCALE_C" "$(field "scale-$n-c$SCALE_C" ok_rps)" "$(field "scale-1-c$SCALE_C" ok_rps)" ""
  done
  for c in $CONCURRENCY; do
    # The secondary runs ran once, after the rounds: against round 1.
    ratio "durable rejection 429(near-cache off)/429(near-cache on) c=$c" "$(per "full-redis-c$c" s429)" "$(per "full-nearcache-c$c-r1" s429)" ""
    ratio "durable roomy batching (coalescer + group commit)/none c=$c" "$(field "roomy-c$c-r1" ok_rps)" "$(field "roomy-nobatching-c$c" ok_rps)" ""
    ratio "durable admitted/mysqlslap-3stmt (the flow's own SELECT+INSERT+UPDATE) c=$c" "$(field "roomy-c$c-r1" ok_rps)" "$(field "mysqlslap-3stmt-c$c" rps)" ""
    ratio "durable mysqlslap-3stmt/mysqlslap (the statement mix's own ceiling) c=$c" "$(field "mysqlslap-3stmt-c$c" rps)" "$(field "mysqlslap-c$c-r1" rps)" ""
    hl_ratio "durable unlimited/mysqlslap c=$c" "" "unlimited-c$c-R" ok_rps "mysqlslap-c$c-R" rps
    # Noise-robust: the ratio if both sides were bound by the same CPUs,
    # from server CPU per unit (payserver + mariadbd + redis).
    hl_ratio "durable cpu-bound admitted/mysqlslap c=$c" "" "mysqlslap-c$c-R" total_ms "roomy-c$c-R" total_ms
    hl_ratio "durable cpu-bound rejection 429(near-cache)/healthz c=$c" "" "healthz-c$c-R" total_ms "full-nearcache-c$c-R" total_ms
    hl_ratio "durable cpu-bound roomy/unlimited c=$c" "" "unlimited-c$c-R" total_ms "roomy-c$c-R" total_ms
    stage_gaps "$c"
  done
  if [[ -n "$NONDURABLE_CONCURRENCY" ]]; then
    echo
    echo "== ratios, secondary, NON-DURABLE (not the headline)"
    for c in $NONDURABLE_CONCURRENCY; do
      ratio "non-durable admitted/mysqlslap c=$c" "$(field "nondurable-roomy-c$c" ok_rps)" "$(field "nondurable-mysqlslap-c$c" rps)" ""
      ratio "non-durable limiter-overhead roomy/unlimited c=$c" "$(field "nondurable-roomy-c$c" ok_rps)" "$(field "nondurable-unlimited-c$c" ok_rps)" ""
      ratio "durable/non-durable admitted c=$c" "$(field "roomy-c$c-r1" ok_rps)" "$(field "nondurable-roomy-c$c" ok_rps)" ""
      ratio "durable/non-durable mysqlslap c=$c" "$(field "mysqlslap-c$c-r1" rps)" "$(field "nondurable-mysqlslap-c$c" rps)" ""
    done
  fi
  if [[ "${E2E_BATCHING:-1}" != 0 ]]; then
    echo
    echo "== limiter batching (coalescer as shipped), 64 callers"
    "$WORK/e2e" batching -header=false -addr "$HOST:$REDIS_PORT" -callers 64 -duration 6s -rounds 6
  fi
  echo
  "$WORK/benchenv" end -state "$WORK/benchenv.json"
  echo
  echo "RESULT lines:"
  cat "$RESULTS"
} 2>&1 | tee "$WORK/report"
status="${PIPESTATUS[0]}"
mkdir -p "$(dirname "$OUT")"
cp "$WORK/report" "$OUT"
log "written to $OUT"
exit "$status"
