#!/usr/bin/env bash
# bench-gateway.sh - the cost of a POST /pay through the HTTP channel
# gateway connector against one to the in-process simulator, side by side
# in one run on the durable MariaDB and Redis (make bench-gateway), and
# the resolver's time from UNKNOWN to resolved at the default settings.
#
# One payserver (shipped defaults, log level warn) on a fresh database
# (payserver_bench_gateway) on the durable MariaDB (innodb_flush_log_at_trx_commit=1,
# sync_binlog=1) and a Redis, both this run's own (testenv command), with
# ALIPAY an in-process simulator and WECHAT served by cmd/channel-emulator
# (default behaviour: SUCCEEDED at once; its ledger a SQLite file with
# synchronous=FULL, one fsync per call, on the same disk). Two runs,
# interleaved GW_ROUNDS times, each GW_DURATION at GW_CONCURRENCY
# connections, every request with a requestId of its own:
#   inproc    channel ALIPAY (simulator)
#   gateway   channel WECHAT (HTTP, signed, through the emulator)
# It prints each run, the totals and RATIO lines (gateway/inproc; reported,
# no target). Then GW_UNKNOWN payments whose answer the emulator loses
# (lostAnswerRate 1) are answered UNKNOWN after the channel timeout, and the
# time from that answer to GET /pay showing them resolved is printed
# (RESOLVE p50/max). The report starts and ends with the conditions
# (bench/benchenv: commit, machine, load, what else ran). Output also goes
# to bench/out/gateway.txt.
#
# Knobs: GW_DURATION (8s), GW_ROUNDS (3), GW_CONCURRENCY (64),
# GW_THREADS (2), GW_PORT (18191), GW_EMU_PORT (18192), GW_UNKNOWN (20),
# GW_LEDGER_DIR (the emulator's ledger directory; default on the
# repository's disk: /dev/shm leaves its fsync out, to see the connector's
# own cost).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO="${GO:-go}"
[[ -n "${PAYSERVER_TEST_MYSQL_DURABLE_ADDR:-}" ]] ||
  exec "$GO" run ./internal/testenv/cmd/testenv -services redis,mariadb-durable -- "scripts/$(basename "$0")" "$@"
DURATION="${GW_DURATION:-8s}"
ROUNDS="${GW_ROUNDS:-3}"
CONC="${GW_CONCURRENCY:-64}"
THREADS="${GW_THREADS:-2}"
PORT="${GW_PORT:-18191}"
EPORT="${GW_EMU_PORT:-18192}"
UNKNOWN="${GW_UNKNOWN:-20}"
HOST=127.0.0.1
MYSQL_PORT="${PAYSERVER_TEST_MYSQL_DURABLE_ADDR##*:}"
REDIS_PORT="${PAYSERVER_TEST_REDIS_ADDR##*:}"
DB=payserver_bench_gateway
OUT=bench/out/gateway.txt
SECRET=bench-gateway-secret-0123456789abcdef  # 32 bytes or more

log() { echo "bench-gateway: $*" >&2; }
die() { echo "bench-gateway: FAIL: $*" >&2; exit 1; }

scripts/install-wrk.sh || die "wrk is missing and could not be installed"
WORK="$(mktemp -d "$PWD/.bench-gateway.XXXXXX")" # on the repository's disk, as the database's
PID="" EPID=""
cleanup() {
  for p in "$PID" "$EPID"; do
    [[ -z "$p" ]] || { kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; }
  done
  rm -rf "$WORK" "${LEDGER:-}" "${LEDGER:-}-wal" "${LEDGER:-}-shm"
}
trap cleanup EXIT

mariadb --no-defaults --protocol=tcp -h "$HOST" -P "$MYSQL_PORT" -upayserver -ppayserver -N \
  -e "DROP DATABASE IF EXISTS $DB; CREATE DATABASE $DB CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
log "building payserver and the channel emulator"
"$GO" build -o "$WORK/payserver" ./cmd/payserver
"$GO" build -o "$WORK/channel-emulator" ./cmd/channel-emulator
"$GO" build -o "$WORK/benchenv" ./bench/benchenv/cmd/benchenv
LEDGER_DIR="${GW_LEDGER_DIR:-$WORK}"
LEDGER="$(mktemp -u "$LEDGER_DIR/bench-gateway-ledger.XXXXXX.db")"
"$WORK/channel-emulator" -addr "$HOST:$EPORT" -secret "$SECRET" -ledger "$LEDGER" -channels WECHAT \
  -log-level warn >"$WORK/emulator.log" 2>&1 &
EPID=$!
cat >"$WORK/limits.yaml" <<'YAML'
limits:
  GIN:ALIPAY: {limit: 10000000, window: 1s}
  GGW:WECHAT: {limit: 10000000, window: 1s}
  GUNK:WECHAT: {limit: 10000000, window: 1s}
YAML
printf 'channels:\n  ALIPAY: {}\n  WECHAT:\n    gateway: {url: "http://%s:%s/WECHAT", secret: %s}\n' "$HOST" "$EPORT" "$SECRET" >"$WORK/payserver.yaml"
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
curl -sf "http://$HOST:$EPORT/healthz" >/dev/null || die "the channel emulator does not answer"

RESULTS="$WORK/results"
: >"$RESULTS"
RUN="g$(date +%s)"
{
  "$WORK/benchenv" begin -state "$WORK/benchenv.json" -title "POST /pay through the channel gateway against in process (scripts/bench-gateway.sh)"
  echo "bench-gateway: durable MariaDB :$MYSQL_PORT, Redis :$REDIS_PORT,"
  echo "  $CONC connections, $THREADS wrk threads, $ROUNDS interleaved rounds of $DURATION per run;"
  echo "  gateway = WECHAT over HTTP to cmd/channel-emulator (ledger $LEDGER_DIR, fsync per call)"
  for r in $(seq "$ROUNDS"); do
    for spec in "inproc ALIPAY GIN" "gateway WECHAT GGW"; do
      read -r label ch biz <<<"$spec"
      out="$(timeout 120 wrk -t"$THREADS" -c"$CONC" -d"$DURATION" --timeout 10s -s bench/e2e/gateway.lua \
        "http://$HOST:$PORT" -- "$label" "$ch" "$biz" "$RUN-$r-$label")" || die "wrk $label failed: $out"
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
      split("inproc gateway", ls, " ")
      for (j = 1; j <= 2; j++) { l = ls[j]; rps[l] = req[l] / secs[l]
        printf "  %-10s %10.0f %10d %12.2f %12.2f\n", l, rps[l], ok[l], p50[l] / n[l] / 1000, p99[l] / n[l] / 1000 }
      printf "RATIO gateway/inproc req/s = %.3f (reported)\n", rps["gateway"] / rps["inproc"]
      printf "RATIO gateway/inproc p50 = %.3f (reported)\n", p50["gateway"] / p50["inproc"]
    }' "$RESULTS"

  # The resolver at its defaults: answers lost, then resolved by query.
  curl -sf -XPOST "http://$HOST:$EPORT/admin/channels/WECHAT" -d '{"lostAnswerRate":1}' >/dev/null
  for i in $(seq "$UNKNOWN"); do
    ( curl -s -o /dev/null -X POST "http://$HOST:$PORT/pay" -H 'Content-Type: application/json' \
        -d '{"requestId":"'"$RUN-unk-$i"'","bizType":"GUNK","channel":"WECHAT","merchantId":"M1","amount":1999,"currency":"CNY"}'
      echo "$i $(date +%s%N)" >>"$WORK/unknown-at" ) &
  done
  wait
  curl -sf -XPOST "http://$HOST:$EPORT/admin/channels/WECHAT" -d '{"lostAnswerRate":0}' >/dev/null
  : >"$WORK/resolve-ms"
  deadline=$(( $(date +%s) + 120 ))
  while read -r i at; do
    while :; do
      body="$(curl -s "http://$HOST:$PORT/pay/$RUN-unk-$i")"
      if grep -q '"resolvedBy"' <<<"$body"; then
        echo $(( ($(date +%s%N) - at) / 1000000 )) >>"$WORK/resolve-ms"
        break
      fi
      (( $(date +%s) < deadline )) || die "$RUN-unk-$i was not resolved in 2 minutes: $body"
      sleep 0.02
    done
  done <"$WORK/unknown-at"
  sort -n "$WORK/resolve-ms" | awk '{ v[NR] = $1 } END {
    printf "RESOLVE %d UNKNOWN payments (lost answers) resolved by query: p50 %d ms, max %d ms after their UNKNOWN answer (defaults: backoff 1s, 4 workers, RESOLVE key unlimited)\n", NR, v[int((NR + 1) / 2)], v[NR] }'
  echo
  "$WORK/benchenv" end -state "$WORK/benchenv.json"
} | tee /dev/stderr >"$WORK/out.txt"
mkdir -p "$(dirname "$OUT")"
cp "$WORK/out.txt" "$OUT"
grep -q '^RESOLVE ' "$OUT" || die "no results"
awk '$1 == "RESULT" && $0 !~ / non2xx=0 / { bad = 1 } END { exit bad }' "$RESULTS" || die "some answers were not 2xx: see $OUT"
