package main

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"time"
)

// benchScript is the script the Redis store's Check runs for the
// benchmark's keys (one sliding count window: a plain key, plain_check.lua).
const benchScript = "plain_check.lua"

// checkScriptSource returns the Lua source of the Redis store's script
// file name as the store sends it: now.lua (the time preamble) and
// identity.lua (a sliding count window's records of amounts) followed by
// the script, read from the store's directory (internal/ratelimit/redisstore,
// which embeds them). This is how redis-benchmark gets byte for byte the
// script that the store's Check runs; the SHA1 of the text is the one
// go-redis sends with EVALSHA.
func checkScriptSource(dir, name string) (string, error) {
	var src []byte
	for _, f := range []string{"now.lua", "identity.lua", name} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		src = append(src, b...)
	}
	return string(src), nil
}

func sha1Hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// findScripts looks for the Redis store's scripts
// (internal/ratelimit/redisstore) in the current directory and its parents
// (go run ./bench/limiter runs from the module root).
func findScripts(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "internal", "ratelimit", "redisstore")
		if _, err := os.Stat(filepath.Join(p, benchScript)); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return p, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("internal/ratelimit/redisstore not found above the working directory; pass -scripts")
		}
		dir = parent
	}
}

// oneCountWindowArgs is the check scripts' ARGV for one member (amount 0) against
// one sliding count window of limit and size, with the time read from Redis:
// TTL margin (ms), now (0: Redis TIME), the number of windows, the window's
// kind (0), limit, size (µs), four unused period boundaries and its track
// (0), no reservations (0), no learning windows (0: the window does not
// learn from throttles, as the Redis store's Check, the store-open contender), then
// the member and its amount. Its KEYS are the window's key alone.
func oneCountWindowArgs(limit int64, size time.Duration, member string) []any {
	return []any{int64(2000), int64(0), int64(1), int64(0), limit, size.Microseconds(), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), member, int64(0)}
}
