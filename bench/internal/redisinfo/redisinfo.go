// Package redisinfo reads what the benchmarks measure Redis by: INFO
// commandstats, cpu and memory fields.
package redisinfo

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// CmdStat is one cmdstat_* line of INFO commandstats.
type CmdStat struct {
	Calls  int64
	Usec   int64
	Failed int64
}

// CommandStats reads INFO commandstats into a map keyed by command name
// ("evalsha", "zadd", "config|resetstat", ...).
func CommandStats(ctx context.Context, c *redis.Client) (map[string]CmdStat, error) {
	s, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO commandstats: %w", err)
	}
	out := map[string]CmdStat{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st CmdStat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				st.Calls = n
			case "usec":
				st.Usec = n
			case "failed_calls", "rejected_calls":
				st.Failed += n
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out, nil
}

// AdminCommand reports whether a command is the benchmark's own bookkeeping
// rather than limiter traffic.
func AdminCommand(name string) bool {
	for _, p := range []string{"info", "config", "ping", "hello", "client", "script", "del", "memory", "object", "scan", "command", "unlink", "exists"} {
		if name == p || strings.HasPrefix(name, p+"|") {
			return true
		}
	}
	return false
}

// ServerCPU returns Redis's used_cpu_user + used_cpu_sys in seconds.
func ServerCPU(ctx context.Context, c *redis.Client) (float64, error) {
	s, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO cpu: %w", err)
	}
	var total float64
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_user" && k != "used_cpu_sys") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s=%q: %w", k, v, err)
		}
		total += f
	}
	return total, nil
}

// Field returns one field of an INFO section, or "".
func Field(ctx context.Context, c *redis.Client, section, field string) string {
	s, err := c.Info(ctx, section).Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && k == field {
			return v
		}
	}
	return ""
}

// scriptCommands are the commands that run Lua scripts or functions.
var scriptCommands = []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}

// Scripts sums the script commands of a CommandStats reading (EVAL,
// EVALSHA, their read-only forms and FCALL): whichever script a store
// sends, its calls and its time are counted.
func Scripts(st map[string]CmdStat) CmdStat {
	var sum CmdStat
	for _, name := range scriptCommands {
		s := st[name]
		sum.Calls += s.Calls
		sum.Usec += s.Usec
		sum.Failed += s.Failed
	}
	return sum
}

// UsedMemory returns INFO memory used_memory: the bytes Redis's allocator
// holds for data and overhead.
func UsedMemory(ctx context.Context, c *redis.Client) (int64, error) {
	v := Field(ctx, c, "memory", "used_memory")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("INFO memory used_memory=%q: %w", v, err)
	}
	return n, nil
}
