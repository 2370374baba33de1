package testutil

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// MustFreshMySQL creates an empty database payserver_<random> on the real
// MariaDB, drops it when the test ends, and returns a DSN for it.
func MustFreshMySQL(tb testing.TB) string {
	tb.Helper()
	base := MySQLDSN(tb)
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		tb.Fatalf("PAYSERVER_TEST_MYSQL_DSN: %v", err)
	}
	name := "payserver_" + strings.ToLower(UniqueName("t"))
	admin := *cfg
	admin.DBName = ""
	db, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE " + name + " CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"); err != nil {
		tb.Fatalf("create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		db, err := sql.Open("mysql", admin.FormatDSN())
		if err == nil {
			_, _ = db.Exec("DROP DATABASE IF EXISTS " + name)
			_ = db.Close()
		}
	})
	fresh := *cfg
	fresh.DBName = name
	return fresh.FormatDSN()
}
