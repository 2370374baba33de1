package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"payserver/internal/repo"
)

// TestMigrateHelpDoesNotMigrate: `migrate --help` prints the command's
// usage and leaves the database alone (it used to migrate the SQLite file);
// an argument migrate does not take is refused.
func TestMigrateHelpDoesNotMigrate(t *testing.T) {
	dir := t.TempDir()
	env := envFrom(map[string]string{"PAYSERVER_DATA_DIR": dir, "PAYSERVER_CONFIG": "/dev/null"})
	for _, tt := range []struct {
		arg      string
		wantCode int
	}{{"--help", 0}, {"-h", 0}, {"help", 0}, {"--dry-run", 2}, {"now", 2}} {
		t.Run(tt.arg, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run([]string{"migrate", tt.arg}, env, &out, &errOut)
			if code != tt.wantCode || !strings.Contains(out.String()+errOut.String(), "usage: payserver migrate") {
				t.Errorf("migrate %s = %d, stdout %q, stderr %q; want %d and the usage", tt.arg, code, out.String(), errOut.String(), tt.wantCode)
			}
			if _, err := os.Stat(filepath.Join(dir, "payserver.db")); !os.IsNotExist(err) {
				t.Fatalf("migrate %s opened the database (stat: %v)", tt.arg, err)
			}
		})
	}
}

// TestMigratePrintsVersions: `migrate` prints each migration it applied and
// the version reached, and "already at N" when there is nothing to do.
func TestMigratePrintsVersions(t *testing.T) {
	env := envFrom(map[string]string{"PAYSERVER_DATA_DIR": t.TempDir(), "PAYSERVER_CONFIG": "/dev/null", "PAYSERVER_LOG_LEVEL": "warn"})
	var out, errOut bytes.Buffer
	if code := run([]string{"migrate"}, env, &out, &errOut); code != 0 {
		t.Fatalf("migrate = %d: %s", code, errOut.String())
	}
	first := regexp.MustCompile(`(?m)^migrating sqlite .*\napplied 00001_orders\.sql\n(applied \d+_\w+\.sql\n)*schema at version (\d+) \(was 0\)\n$`).FindStringSubmatch(out.String())
	if first == nil {
		t.Fatalf("first migrate printed %q, want one \"applied FILE\" line per migration, then \"schema at version N\"", out.String())
	}
	out.Reset()
	if code := run([]string{"migrate"}, env, &out, &errOut); code != 0 {
		t.Fatalf("second migrate = %d: %s", code, errOut.String())
	}
	if want := "already at " + first[2] + "\n"; !strings.HasSuffix(out.String(), want) || strings.Contains(out.String(), "applied") {
		t.Errorf("second migrate printed %q, want %q", out.String(), want)
	}
}

// TestMigrateSaysWhichDatabase: migrate names the database it migrates
// before touching it (the driver and the SQLite path, or the MySQL
// user@host:port/database without the password) and the versions it went
// from and to; an empty PAYSERVER_MYSQL_DSN says it means the embedded
// SQLite file.
func TestMigrateSaysWhichDatabase(t *testing.T) {
	dir := t.TempDir()
	env := envFrom(map[string]string{"PAYSERVER_DATA_DIR": dir, "PAYSERVER_CONFIG": "/dev/null", "PAYSERVER_LOG_LEVEL": "warn"})
	var out, errOut bytes.Buffer
	if code := run([]string{"migrate"}, env, &out, &errOut); code != 0 {
		t.Fatalf("migrate = %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	wantFirst := "migrating sqlite " + filepath.Join(dir, "payserver.db") + " (PAYSERVER_MYSQL_DSN is empty: the embedded SQLite file)"
	if lines[0] != wantFirst {
		t.Errorf("first line %q, want %q", lines[0], wantFirst)
	}
	if last := lines[len(lines)-1]; !regexp.MustCompile(`^schema at version \d+ \(was 0\)$`).MatchString(last) {
		t.Errorf("last line %q, want \"schema at version N (was 0)\"", last)
	}
	for _, tt := range []struct{ dsn, want string }{
		{"payserver:s3cret@tcp(db.internal:3306)/payserver?parseTime=true", "mysql payserver@db.internal:3306/payserver"},
		{"root:pw@unix(/run/mysqld/mysqld.sock)/pay", "mysql root@unix(/run/mysqld/mysqld.sock)/pay"},
	} {
		got := describeDatabase(repo.OpenOptions{Driver: repo.MySQL, DSN: tt.dsn}, "")
		if got != tt.want || strings.Contains(got, "s3cret") || strings.Contains(got, "pw") {
			t.Errorf("describeDatabase(%q) = %q, want %q (never the password)", tt.dsn, got, tt.want)
		}
	}
}
