// Command payserver is the payments service: POST /pay with exact
// per-channel sliding-window limits in Redis.
//
//	payserver                      serve (the default)
//	payserver migrate              apply database migrations and exit
//	payserver check-limits FILE    validate a limits document offline
//	payserver report [--from …]    print the channel-limit report from the database
//	payserver what-if PROPOSED     replay the recorded decisions under a proposed limits document
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"payserver/internal/httpapi"
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// run executes one command; environ is the environment as os.Environ.
func run(args []string, environ []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "check-limits":
		return checkLimits(args, environ, stdout, stderr)
	case "report":
		return reportCmd(args, environ, stdout, stderr)
	case "what-if":
		return whatIfCmd(args, environ, stdout, stderr)
	case "migrate":
		if len(args) > 0 {
			return migrateHelp(args, stdout, stderr)
		}
	case "serve":
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, "usage: payserver [serve | migrate | check-limits FILE | report [--from TIME] ... | what-if PROPOSED.yaml [--from TIME] ...]")
		return 0
	default:
		fmt.Fprintf(stderr, "payserver: unknown command %q\nusage: payserver [serve | migrate | check-limits FILE | report [--from TIME] ... | what-if PROPOSED.yaml [--from TIME] ...]\n", cmd)
		return 2
	}
	cfg, err := LoadConfig(environ)
	if err != nil {
		fmt.Fprintf(stderr, "payserver: %v\n", err)
		return 2
	}
	log := newLogger(cfg, stderr)
	httpapi.SetReleaseMode()             // gin's mode is process-wide; set once, here
	redis.SetLogger(newRedisLogger(log)) // go-redis's logger is package-level too
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cmd == "migrate" {
		if err := migrateOnly(ctx, cfg, log, stdout); err != nil {
			log.Error("migrate failed", "err", err)
			return 1
		}
		return 0
	}
	m := NewMain(cfg, log)
	if err := m.Run(ctx); err != nil {
		log.Error("payserver failed to start", "err", err)
		_ = m.Close() // Run closed what it opened; this logs the stop
		return 1
	}
	if len(cfg.RedisAddrs) == 0 && cfg.MySQLDSN == "" {
		startBanner(cfg, m.Addr(), log, stderr)
	}
	<-ctx.Done()
	log.Info("shutting down: draining in-flight requests")
	if err := m.Close(); err != nil {
		log.Error("shutdown", "err", err)
		return 1
	}
	return 0
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == LogJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// startBanner tells a new user that embedded mode is up, single-instance,
// how to try it, and where the dashboard is and how to log in to it: plain text for the text log format, one structured
// record for the JSON format (so a log pipeline never sees a stray line).
func startBanner(cfg Config, addr string, log *slog.Logger, stderr io.Writer) {
	try := fmt.Sprintf(`curl -s -X POST http://%s/pay -H 'Content-Type: application/json' -d '{"requestId":"try-1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M1","amount":1000,"currency":"CNY"}'`, addr)
	const what = "payserver is up (embedded mode: single-instance, one process per data dir)"
	dashboard := "http://" + addr + "/dashboard"
	login := "no login from this machine (no PAYSERVER_ADMIN_TOKEN: admin pages answer loopback clients only)"
	if cfg.AdminToken != "" {
		login = "log in with PAYSERVER_ADMIN_TOKEN"
	}
	if cfg.LogFormat == LogJSON {
		log.Info(what, "addr", addr, "dataDir", cfg.DataDir, "try", try, "dashboard", dashboard, "dashboardLogin", login)
		return
	}
	fmt.Fprintf(stderr, "\n%s. Try:\n  %s\nDashboard: %s (%s)\n\n", what, try, dashboard, login)
}
