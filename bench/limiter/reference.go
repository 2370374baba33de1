package main

import (
	"fmt"
	"os/exec"
	"strings"

	"payserver/bench/internal/redisinfo"
)

// reference prints what Lua costs on this Redis and machine, so that the
// script's usec_per_call can be read against it: the fixed cost of one
// EVALSHA, and what each redis.call() adds. Measured with redis-benchmark,
// one connection, so no queueing is involved.
func (b *bench) reference() (ref, error) {
	scripts := []struct{ label, src string }{
		{"EVALSHA of `return 1`", "return 1"},
		{"EVALSHA of 1 redis.call('TIME')", "return redis.call('TIME')"},
		{"EVALSHA of 5 redis.call('TIME')", "redis.call('TIME') redis.call('TIME') redis.call('TIME') redis.call('TIME') return redis.call('TIME')"},
	}
	var per []float64
	for _, s := range scripts {
		sha, err := b.client.ScriptLoad(b.ctx, s.src).Result()
		if err != nil {
			return ref{}, fmt.Errorf("SCRIPT LOAD: %w", err)
		}
		if err := b.client.ConfigResetStat(b.ctx).Err(); err != nil {
			return ref{}, err
		}
		args := []string{"-h", b.host, "-p", b.port, "-c", "1", "-n", "3000", "-P", "1", "--csv", "EVALSHA", sha, "0"}
		if out, err := exec.Command(b.o.redisBenchmark, args...).CombinedOutput(); err != nil {
			return ref{}, fmt.Errorf("redis-benchmark %s: %v: %s", strings.Join(args, " "), err, out)
		}
		st, err := redisinfo.CommandStats(b.ctx, b.client)
		if err != nil {
			return ref{}, err
		}
		es := st["evalsha"]
		if es.Calls == 0 {
			return ref{}, fmt.Errorf("no EVALSHA counted for %q", s.src)
		}
		per = append(per, float64(es.Usec)/float64(es.Calls))
	}
	r := ref{bare: per[0], perCall: (per[2] - per[0]) / 5}
	fmt.Printf("CPU   reference, one connection: %s = %.2f µs; %s = %.2f µs; %s = %.2f µs, so each redis.call() costs about %.2f µs here.\n",
		scripts[0].label, per[0], scripts[1].label, per[1], scripts[2].label, per[2], r.perCall)
	fmt.Println("      plainCheckScript (the script of these one-window keys) makes, per call and whatever the number of members it decides: TIME, ZREMRANGEBYSCORE, ZCARD, ZMSCORE (window not empty), then, something admitted, HLEN of the slice's hash of amounts (window over 128 members), HSET of the amounts + PEXPIRE (a new hash), ZADD + PEXPIRE, and/or one ZRANGE (something refused): 7 to 9 redis.call()s to admit, 5 to refuse.")
	return r, nil
}

// ref is the Lua cost reference of this machine, in µs.
type ref struct {
	bare    float64 // EVALSHA of return 1
	perCall float64 // what one redis.call('TIME') adds
}
