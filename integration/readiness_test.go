package integration

import (
	"bytes"
	"database/sql"
	"os"
	"os/exec"
	"strings"
	"testing"

	"payserver/internal/testutil"
)

// TestMigrateHelpDoesNotMigrate: `payserver migrate --help` prints its
// usage and leaves the database alone.
func TestMigrateHelpDoesNotMigrate(t *testing.T) {
	dsn := testutil.MustFreshMySQL(t)
	env := map[string]string{"PAYSERVER_MYSQL_DSN": dsn, "PAYSERVER_DATA_DIR": t.TempDir(), "PAYSERVER_CONFIG": "/dev/null"}
	for _, arg := range []string{"--help", "-h"} {
		if out := runMigrate(t, env, arg); !strings.Contains(out, "usage: payserver migrate") {
			t.Errorf("migrate %s printed no usage:\n%s", arg, out)
		}
	}
	if tables := showTables(t, dsn); len(tables) != 0 {
		t.Fatalf("migrate --help migrated: the database has %v", tables)
	}
}

// TestReadyzRedisUnreachable: with Redis unreachable from the start, policy
// local keeps the instance ready (Redis degraded, decisions in process) and
// serving; policy deny takes it out of traffic, naming redis.
func TestReadyzRedisUnreachable(t *testing.T) {
	for _, tt := range []struct {
		policy     string
		wantStatus int
		wantRedis  string
	}{
		{"local", 200, "degraded (deciding in process)"},
		{"deny", 503, "connect"},
	} {
		t.Run(tt.policy, func(t *testing.T) {
			s := startServer(t, serverOptions{Env: map[string]string{
				"PAYSERVER_REDIS_ADDR": freePort(t), "PAYSERVER_LIMITER_POLICY": tt.policy,
			}})
			r := s.do(t, "GET", "/readyz", nil, nil)
			body := r.JSON(t)
			checks, _ := body["checks"].(map[string]any)
			if redis, _ := checks["redis"].(string); r.Status != tt.wantStatus || !strings.Contains(redis, tt.wantRedis) {
				t.Fatalf("/readyz with Redis unreachable under %s: %d %s, want %d with checks.redis containing %q",
					tt.policy, r.Status, r.Body, tt.wantStatus, tt.wantRedis)
			}
			missing, _ := body["missing"].([]any)
			if named := len(missing) == 1 && missing[0] == "redis"; named != (tt.wantStatus == 503) {
				t.Errorf("missing %v under %s", missing, tt.policy)
			}
			if tt.policy == "local" {
				if r := s.pay(t, payBody("redis-unreachable", "ONLINE_PAY", "ALIPAY")); r.Status != 200 {
					t.Errorf("pay under local with Redis unreachable: %d %s, want 200", r.Status, r.Body)
				}
			}
		})
	}
}

// runMigrate runs `payserver migrate args…` with a server's environment and
// returns its standard output; it fails the test on a non-zero exit.
func runMigrate(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	cmd := exec.Command(fastBinary, append([]string{"migrate"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		if k != "PAYSERVER_HTTP_ADDR" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("payserver migrate %v: %v\n%s%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func openSQL(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// showTables lists the tables of dsn's database.
func showTables(t *testing.T, dsn string) []string {
	t.Helper()
	rows, err := openSQL(t, dsn).Query("SHOW TABLES")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return tables
}
