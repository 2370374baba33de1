// Package repotest opens real databases for tests of the order store and of
// the flows built on it.
package repotest

import (
	"context"
	"path/filepath"
	"testing"

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
