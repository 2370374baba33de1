// Package repotest opens real databases for tests of the order store and of
// the flows built on it.
package repotest

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"payserver/internal/repo"
	"payserver/internal/testutil"
)

// Databases returns, for each database payserver supports (real MariaDB and
// an SQLite file), a function that opens a fresh one with every migration
// applied (twice: the second run must be a no-op), closed when the test
// ends. So one suite runs against all of them.
func Databases() map[string]func(t testing.TB) *gorm.DB {
	open := func(t testing.TB, opts repo.OpenOptions) *gorm.DB {
		t.Helper()
		ctx := context.Background()
		db, err := repo.Open(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = repo.Close(db) })
		for i := 0; i < 2; i++ {
			done, err := repo.Migrate(ctx, db, opts.Driver)
			if err != nil {
				t.Fatalf("migrate (run %d): %v", i+1, err)
			}
			if i == 1 && len(done.Applied) > 0 {
				t.Fatalf("the second migrate applied %v, want nothing", done.Applied)
			}
		}
		return db
	}
	return map[string]func(t testing.TB) *gorm.DB{
		"mariadb": func(t testing.TB) *gorm.DB {
			return open(t, repo.OpenOptions{Driver: repo.MySQL, DSN: testutil.MustFreshMySQL(t)})
		},
		"sqlite": func(t testing.TB) *gorm.DB {
			return open(t, repo.OpenOptions{Driver: repo.SQLite, DSN: filepath.Join(t.TempDir(), "p.db")})
		},
	}
}

// ServingGrants are the only privileges the serving process needs on its
// database (docs/OPERATIONS.md, "Least privilege: serving needs only DML"),
// with DELETE on PrunedTable alone.
const ServingGrants = "SELECT, INSERT, UPDATE"

// PrunedTable is the one table the serving process deletes from: the
// decision log, pruned past PAYSERVER_DECISION_LOG_RETENTION.
const PrunedTable = "decision_log"

// LeastPrivilegeMySQL opens a fresh MariaDB database, migrated by the test
// server's user, as a new user granted only ServingGrants on it and
// DELETE on PrunedTable: what a
// server whose migrations run apart (payserver migrate) holds. The user is
// dropped when the test ends.
func LeastPrivilegeMySQL(t testing.TB) *gorm.DB {
	t.Helper()
	ctx := context.Background()
	dsn := testutil.MustFreshMySQL(t)
	owner, err := repo.Open(ctx, repo.OpenOptions{Driver: repo.MySQL, DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Migrate(ctx, owner, repo.MySQL); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if err := repo.Close(owner); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	rootDSN := testutil.Env(t, "PAYSERVER_TEST_MYSQL_ROOT_DSN") // the test user may not create users
	root, err := sql.Open("mysql", rootDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	user := "dml_" + strings.ToLower(testutil.UniqueName("u"))
	if len(user) > 32 {
		user = user[:32]
	}
	const password = "serving-only-dml"
	hosts := []string{"%", "localhost", "127.0.0.1"}
	for _, host := range hosts {
		for _, stmt := range []string{
			"CREATE USER '" + user + "'@'" + host + "' IDENTIFIED BY '" + password + "'",
			"GRANT " + ServingGrants + " ON `" + cfg.DBName + "`.* TO '" + user + "'@'" + host + "'",
			"GRANT DELETE ON `" + cfg.DBName + "`.`" + PrunedTable + "` TO '" + user + "'@'" + host + "'",
		} {
			if _, err := root.Exec(stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
	}
	t.Cleanup(func() {
		root, err := sql.Open("mysql", rootDSN)
		if err != nil {
			return
		}
		defer root.Close()
		for _, host := range hosts {
			_, _ = root.Exec("DROP USER IF EXISTS '" + user + "'@'" + host + "'")
		}
	})
	serving := *cfg
	serving.User, serving.Passwd = user, password
	db, err := repo.Open(ctx, repo.OpenOptions{Driver: repo.MySQL, DSN: serving.FormatDSN()})
	if err != nil {
		t.Fatalf("open as %s (%s only): %v", user, ServingGrants, err)
	}
	t.Cleanup(func() { _ = repo.Close(db) })
	return db
}
