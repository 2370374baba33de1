package repo_test

import (
	"context"
	"path/filepath"
	"testing"

	"gorm.io/gorm"

	"payserver/internal/repo"
	"payserver/internal/testutil"
)

// databases opens, for each database payserver supports, a fresh one with
// every migration applied (twice: the second run must be a no-op), so that
// one suite runs against all of them.
func databases() map[string]func(t *testing.T) *gorm.DB {
	open := func(t *testing.T, opts repo.OpenOptions) *gorm.DB {
		ctx := context.Background()
		db, err := repo.Open(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = repo.Close(db) })
		for i := 0; i < 2; i++ {
			if err := repo.Migrate(ctx, db, opts.Driver); err != nil {
				t.Fatalf("migrate (run %d): %v", i+1, err)
			}
		}
		return db
	}
	return map[string]func(t *testing.T) *gorm.DB{
		"mariadb": func(t *testing.T) *gorm.DB {
			return open(t, repo.OpenOptions{Driver: repo.MySQL, DSN: testutil.MustFreshMySQL(t)})
		},
		"sqlite": func(t *testing.T) *gorm.DB {
			return open(t, repo.OpenOptions{Driver: repo.SQLite, DSN: filepath.Join(t.TempDir(), "p.db")})
		},
	}
}
