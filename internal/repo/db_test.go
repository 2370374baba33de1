package repo_test

import (
	"context"
	"path/filepath"
	"testing"

	"gorm.io/gorm"

	"payserver/internal/repo"
	"payserver/internal/repo/repotest"
)

// databases is repotest.Databases: every supported database, migrated.
func databases() map[string]func(t testing.TB) *gorm.DB { return repotest.Databases() }

// TestSQLiteIsDurable: the embedded database commits with
// synchronous=FULL, so a 2xx's order survives a power loss; WAL's NORMAL
// may lose the last commits.
func TestSQLiteIsDurable(t *testing.T) {
	db, err := repo.Open(context.Background(), repo.OpenOptions{Driver: repo.SQLite, DSN: filepath.Join(t.TempDir(), "p.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = repo.Close(db) })
	for _, tc := range []struct{ pragma, want string }{
		{"synchronous", "2"}, // FULL
		{"journal_mode", "wal"},
	} {
		t.Run(tc.pragma, func(t *testing.T) {
			var got string
			if err := db.Raw("PRAGMA " + tc.pragma).Scan(&got).Error; err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("PRAGMA %s = %s, want %s", tc.pragma, got, tc.want)
			}
		})
	}
}
