#!/usr/bin/env bash
# bench.sh — limiter micro-benchmarks against a real Redis: payserver's Lua
# limiter side by side with redis-benchmark running EVALSHA of the same script,
# go-redis/redis_rate and the naive three-command window. Prints a table and
# RATIO lines, also written to bench/out/limiter.txt. See docs/PERFORMANCE.md.
#
# Usage: scripts/bench.sh [flags of go run ./bench/limiter, e.g. -duration 4s -rounds 3]
#
# Default: a redis-server of its own that internal/testenv starts on a free
# loopback port for the run (or the one PAYSERVER_TEST_REDIS_ADDR names); the
# clients and Redis share both cores with whatever else runs on the machine.
#
# BENCH_PIN=1 scripts/bench.sh: the "same conditions" mode. Starts a private
# redis-server (same binary and settings) on 127.0.0.1:${BENCH_PIN_PORT:-16390}
# pinned to CPU 0 and runs the benchmark, and so every client it starts
# (go-redis goroutines and redis-benchmark alike), pinned to CPU 1; the private
# Redis is shut down on exit. Output goes to bench/out/limiter-pinned.txt.
#
# A ratio below its target prints MISS and does not fail; an error does.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO="${GO:-go}"

# Run again under the testenv command, which starts the Redis and sets
# PAYSERVER_TEST_REDIS_ADDR, unless the caller named one.
[[ -n "${PAYSERVER_TEST_REDIS_ADDR:-}" ]] ||
  exec "$GO" run ./internal/testenv/cmd/testenv -services redis -- "scripts/$(basename "$0")" "$@"
for bin in redis-benchmark redis-cli redis-server; do
  command -v "$bin" >/dev/null || { echo "bench.sh: $bin not found (apt-get install redis-server redis-tools)" >&2; exit 1; }
done
mkdir -p bench/out

if [[ "${BENCH_PIN:-0}" != 1 ]]; then
  # go run compiles before it starts the program: compile time is never measured.
  "$GO" run ./bench/limiter "$@" 2>&1 | tee bench/out/limiter.txt
  exit "${PIPESTATUS[0]}"
fi

command -v taskset >/dev/null || { echo "bench.sh: BENCH_PIN=1 needs taskset (util-linux)" >&2; exit 1; }
if (($(nproc) < 2)); then
  echo "bench.sh: BENCH_PIN=1 needs 2 CPUs (Redis on CPU 0, clients on CPU 1); this machine has $(nproc)" >&2
  exit 1
fi
PIN_PORT="${BENCH_PIN_PORT:-16390}"
PIN_DIR="$(mktemp -d "${TMPDIR:-/tmp}/payserver-bench-redis.XXXXXX")"
if redis-cli -h 127.0.0.1 -p "$PIN_PORT" ping >/dev/null 2>&1; then
  echo "bench.sh: something already answers on 127.0.0.1:$PIN_PORT; stop it (redis-cli -p $PIN_PORT shutdown nosave) or set BENCH_PIN_PORT" >&2
  exit 1
fi
mkdir -p "$PIN_DIR"
taskset -c 0 redis-server --bind 127.0.0.1 --port "$PIN_PORT" --protected-mode yes \
  --save "" --appendonly no --dir "$PIN_DIR" \
  --daemonize yes --pidfile "$PIN_DIR/redis.pid" --logfile "$PIN_DIR/redis.log" </dev/null
trap 'redis-cli -h 127.0.0.1 -p "$PIN_PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$PIN_DIR"' EXIT
for _ in $(seq 100); do
  redis-cli -h 127.0.0.1 -p "$PIN_PORT" ping >/dev/null 2>&1 && break
  sleep 0.05
done
redis-cli -h 127.0.0.1 -p "$PIN_PORT" ping >/dev/null
echo "bench.sh: private redis-server on 127.0.0.1:$PIN_PORT pinned to CPU 0; clients pinned to CPU 1"
"$GO" run -exec "taskset -c 1" ./bench/limiter -addr "127.0.0.1:$PIN_PORT" "$@" 2>&1 | tee bench/out/limiter-pinned.txt
exit "${PIPESTATUS[0]}"
