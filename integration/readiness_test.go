package integration

import (
	"bytes"
	"database/sql"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// TestReadyzNamesASchemaBehind: on an empty database without
// PAYSERVER_AUTO_MIGRATE, the server runs (/healthz 200) but is not ready,
// naming the schema and `payserver migrate`, says so in its log, and creates
// nothing (not even goose's version table). `payserver migrate` prints the
// versions it applied, the running server turns ready without a restart,
// and a second migrate says there was nothing to do.
func TestReadyzNamesASchemaBehind(t *testing.T) {
	dsn := testutil.MustFreshMySQL(t)
	s := startServer(t, serverOptions{DSN: dsn, Env: map[string]string{"PAYSERVER_AUTO_MIGRATE": "false"}})
	if r := s.do(t, "GET", "/healthz", nil, nil); r.Status != 200 {
		t.Fatalf("/healthz on an empty database: %d %s, want 200", r.Status, r.Body)
	}
	r := s.do(t, "GET", "/readyz", nil, nil)
	checks, _ := r.JSON(t)["checks"].(map[string]any)
	if schema, _ := checks["schema"].(string); r.Status != 503 || !strings.Contains(schema, "behind") || !strings.Contains(schema, "payserver migrate") {
		t.Fatalf("/readyz on an empty database: %d %s, want 503 with checks.schema saying behind and `payserver migrate`", r.Status, r.Body)
	}
	if n := strings.Count(s.logs(), "database schema is behind"); n != 1 {
		t.Errorf("%d log lines say the schema is behind, want 1:\n%s", n, s.logs())
	}
	if tables := showTables(t, dsn); len(tables) != 0 {
		t.Fatalf("the server created %v on a database it only reads", tables)
	}
	// A payment that reaches it anyway says what to do.
	if r := s.pay(t, payBody("schema-before-migrate", "ONLINE_PAY", "ALIPAY")); r.Status != 503 ||
		!strings.Contains(string(r.Body), "run `payserver migrate`") || !strings.Contains(string(r.Body), `"dependency":"database"`) {
		t.Errorf("pay on a schema behind: %d %s, want 503 saying to run payserver migrate", r.Status, r.Body)
	}

	out := runMigrate(t, s.env)
	for _, want := range []string{"applied 00001_orders.sql", "schema at version "} {
		if !strings.Contains(out, want) {
			t.Errorf("migrate output lacks %q:\n%s", want, out)
		}
	}
	waitFor(t, "/readyz to turn ready after migrate", 15*time.Second, func() bool {
		return s.do(t, "GET", "/readyz", nil, nil).Status == 200
	})
	if out := runMigrate(t, s.env); !strings.Contains(out, "already at ") || strings.Contains(out, "applied ") {
		t.Errorf("a second migrate printed:\n%s\nwant only \"already at N\"", out)
	}
	if r := s.pay(t, payBody("schema-after-migrate", "ONLINE_PAY", "ALIPAY")); r.Status != 200 {
		t.Fatalf("pay after migrate: %d %s", r.Status, r.Body)
	}
	// The limits document loaded before the migration is in the audit
	// trail once the history table is there.
	waitFor(t, "the load in /limits/history", 15*time.Second, func() bool {
		return strings.Contains(string(s.do(t, "GET", "/limits/history", nil, nil).Body), `"kind":"load"`)
	})
}

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

// TestReadyzServesASchemaAhead: a schema newer than the binary (a rollback
// after a migration) is compatible by the project's rule (migrations only
// add), so the instance stays ready and /readyz says it is ahead.
func TestReadyzServesASchemaAhead(t *testing.T) {
	dsn := testutil.MustFreshMySQL(t)
	s := startServer(t, serverOptions{DSN: dsn}) // migrated at start
	db := openSQL(t, dsn)
	if _, err := db.Exec("INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, TRUE)"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "/readyz to say the schema is ahead", 15*time.Second, func() bool {
		r := s.do(t, "GET", "/readyz", nil, nil)
		checks, _ := r.JSON(t)["checks"].(map[string]any)
		schema, _ := checks["schema"].(string)
		return r.Status == 200 && strings.Contains(schema, "ahead (99999 > ") && strings.Contains(schema, "serving")
	})
	if !strings.Contains(s.logs(), "database schema is ahead") {
		t.Errorf("the log does not say the schema is ahead")
	}
	if r := s.pay(t, payBody("schema-ahead", "ONLINE_PAY", "ALIPAY")); r.Status != 200 {
		t.Fatalf("pay on a schema ahead: %d %s", r.Status, r.Body)
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
