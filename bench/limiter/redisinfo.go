package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// cmdStat is one cmdstat_* line of INFO commandstats.
type cmdStat struct {
	Calls  int64
	Usec   int64
	Failed int64
}

// commandStats reads INFO commandstats into a map keyed by command name
// ("evalsha", "zadd", "config|resetstat", ...).
func commandStats(ctx context.Context, c *redis.Client) (map[string]cmdStat, error) {
	s, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO commandstats: %w", err)
	}
	out := map[string]cmdStat{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st cmdStat
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

// adminCommand reports whether a command is the benchmark's own bookkeeping
// rather than limiter traffic.
func adminCommand(name string) bool {
	for _, p := range []string{"info", "config", "ping", "hello", "client", "script", "del", "memory", "object", "scan", "command", "unlink", "exists"} {
		if name == p || strings.HasPrefix(name, p+"|") {
			return true
		}
	}
	return false
}

// serverCPU returns Redis's used_cpu_user + used_cpu_sys in seconds.
func serverCPU(ctx context.Context, c *redis.Client) (float64, error) {
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

// infoField returns one field of an INFO section, or "".
func infoField(ctx context.Context, c *redis.Client, section, field string) string {
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
