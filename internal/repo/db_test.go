package repo_test

import (
	"context"
	"path/filepath"
	"testing"

	"gorm.io/gorm"

	"payserver/internal/repo"
	"payserver/internal/repo/repotest"
)

// databases is repotest.Databases (every supported database, migrated),
// and MariaDB opened as a user with only the serving grants
// (repotest.LeastPrivilegeMySQL): every store suite proves that serving
// needs no other privilege.
func databases() map[string]func(t testing.TB) *gorm.DB {
	dbs := repotest.Databases()
	dbs["mariadb-least-privilege"] = repotest.LeastPrivilegeMySQL
	return dbs
}

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

// TestServingGrantsReadTheSchema: a user with only the serving grants
// reads the schema's version (the readiness check), and finds it current.
func TestServingGrantsReadTheSchema(t *testing.T) {
	db := repotest.LeastPrivilegeMySQL(t)
	s, err := repo.ReadSchema(context.Background(), db, repo.MySQL)
	if err != nil || s.State != repo.SchemaCurrent {
		t.Fatalf("ReadSchema as a %s user = %v, %v; want current", repotest.ServingGrants, s, err)
	}
}
