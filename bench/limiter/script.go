package main

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// benchScript is the script RedisStore.Check runs for the benchmark's keys
// (one sliding count window: a plain key, plainCheckScript).
const benchScript = "plainCheckScript"

// checkScriptSource returns the Lua source of ratelimit's script variable
// name, read from internal/ratelimit/lua.go with the Go parser. The
// variable is unexported, so this is how redis-benchmark gets byte for byte
// the script that RedisStore.Check runs; the SHA1 of the text is the one
// go-redis sends with EVALSHA.
func checkScriptSource(luaGo, name string) (string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, luaGo, nil, 0)
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", luaGo, err)
	}
	var src string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || src != "" {
			return src == ""
		}
		for i, n := range vs.Names {
			if n.Name != name || i >= len(vs.Values) {
				continue
			}
			call, ok := vs.Values[i].(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				continue
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			if s, err := strconv.Unquote(lit.Value); err == nil {
				src = s
			}
		}
		return false
	})
	if src == "" {
		return "", errors.New("no `var " + name + " = redis.NewScript(\"...\")` in " + luaGo)
	}
	return src, nil
}

func sha1Hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// findLuaGo looks for internal/ratelimit/lua.go in the current directory and
// its parents (go run ./bench/limiter runs from the module root).
func findLuaGo(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "internal", "ratelimit", "lua.go")
		if _, err := os.Stat(p); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return p, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("internal/ratelimit/lua.go not found above the working directory; pass -lua")
		}
		dir = parent
	}
}

// oneCountWindowArgs is the check scripts' ARGV for one member (amount 0) against
// one sliding count window of limit and size, with the time read from Redis:
// TTL margin (ms), now (0: Redis TIME), the number of windows, the window's
// kind (0), limit, size (µs), four unused period boundaries and its track
// (0), no reservations (0), no learning windows (0: the window does not
// learn from throttles, as RedisStore.Check's store-open contender), then
// the member and its amount. Its KEYS are the window's key and the member's
// identity key there (the window's key + ":#" + member).
func oneCountWindowArgs(limit int64, size time.Duration, member string) []any {
	return []any{int64(2000), int64(0), int64(1), int64(0), limit, size.Microseconds(), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), member, int64(0)}
}
