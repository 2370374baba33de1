#!/usr/bin/env bash
# What one redis.call costs inside a script when each call is on another
# of 10,000 sorted sets, as a check's merchants' windows are: per command,
# the EVAL time of a loop of 31 calls on distinct keys, less that of the
# same loop without the call, over 31 (INFO commandstats). docs/PERFORMANCE.md,
# "Limits per merchant", quotes its figures.
#
#   go run ./internal/testenv/cmd/testenv -services redis -- scripts/redis-call-cost.sh [evals [rounds]]
#
# It writes keys '{rcc}:*' into the Redis at PAYSERVER_TEST_REDIS_ADDR (a
# loopback address, as testenv gives) and deletes them at the end. It
# resets that server's INFO commandstats.
set -euo pipefail
addr=${PAYSERVER_TEST_REDIS_ADDR:?run it under the testenv command, which starts a Redis}
host=${addr%:*}
port=${addr##*:}
case $host in
127.* | localhost | ::1 | '[::1]') ;;
*)
	echo "redis-call-cost: $addr is not a loopback address" >&2
	exit 2
	;;
esac
evals=${1:-1000}
rounds=${2:-5}
cli() { redis-cli -h "${host#[}" -p "$port" "$@"; }

# 10,000 sorted sets of one member each, as 10,000 merchants' windows
# with one member each.
cli EVAL "for i = 0, 9999 do redis.call('ZADD', '{rcc}:m:' .. i, 1000000 + i, 'req-' .. i) end return 1" 0 >/dev/null

declare -A body=(
	[none]="local x = k"
	[EXISTS]="redis.call('EXISTS', k)"
	[ZSCORE]="redis.call('ZSCORE', k, 'absent')"
	[ZCOUNT]="redis.call('ZCOUNT', k, '(500', '+inf')"
	[ZRANGE]="redis.call('ZRANGE', k, 0, 0)"
	[ZRANGE_WITHSCORES]="redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')"
	[refusal_reads]="redis.call('ZREMRANGEBYSCORE', k, '-inf', 500) redis.call('ZCARD', k) redis.call('ZMSCORE', k, 'absent') redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')"
)
order=(none EXISTS ZSCORE ZCOUNT ZRANGE ZRANGE_WITHSCORES refusal_reads)

# evalUs runs the loop with body $1 evals times and prints EVAL's µs per call.
evalUs() {
	local script="local b = tonumber(ARGV[1]) for j = 0, 30 do local k = '{rcc}:m:' .. ((b * 31 + j * 97) % 10000) $1 end return 1"
	cli CONFIG RESETSTAT >/dev/null
	for ((r = 1; r <= evals; r++)); do
		printf 'EVAL "%s" 0 %d\n' "$script" "$r"
	done | cli >/dev/null
	cli INFO commandstats | sed -n 's/^cmdstat_eval:.*usec_per_call=\([0-9.]*\).*/\1/p'
}

# Rounds interleave the bodies, each against its round's loop alone, so
# that the machine's drift over the run falls on every body alike.
declare -A got
for ((round = 1; round <= rounds; round++)); do
	base=$(evalUs "${body[none]}")
	for name in "${order[@]:1}"; do
		us=$(evalUs "${body[$name]}")
		got[$name]+="$(awk -v a="$us" -v b="$base" 'BEGIN { printf "%.2f", (a - b) / 31 }') "
	done
done
echo "31 calls on distinct keys in one script, $evals EVALs per body and round, $rounds rounds"
echo "| call | µs per call beyond the loop, median | lowest | highest |"
echo "|---|---:|---:|---:|"
for name in "${order[@]:1}"; do
	# shellcheck disable=SC2086 # the rounds' figures, one a word
	printf '%s\n' ${got[$name]} | sort -g | awk -v n="$name" '{ v[NR] = $1 } END { printf "| %s | %.1f | %.1f | %.1f |\n", n, v[int((NR + 1) / 2)], v[1], v[NR] }'
done
cli EVAL "for i = 0, 9999 do redis.call('DEL', '{rcc}:m:' .. i) end return 1" 0 >/dev/null
