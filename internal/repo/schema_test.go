package repo_test

import (
	"context"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"gorm.io/gorm"

	"payserver/internal/repo"
	"payserver/internal/testutil"
)

func TestCompareSchema(t *testing.T) {
	embedded := []int64{1, 2, 3, 5}
	tests := []struct {
		name    string
		applied []int64
		want    repo.Schema
		text    string
	}{
		{"empty database", nil,
			repo.Schema{State: repo.SchemaBehind, Applied: 0, Embedded: 5, Missing: []int64{1, 2, 3, 5}}, "behind (0 < 5)"},
		{"only goose's initial row", []int64{0},
			repo.Schema{State: repo.SchemaBehind, Applied: 0, Embedded: 5, Missing: []int64{1, 2, 3, 5}}, "behind (0 < 5)"},
		{"one migration behind", []int64{0, 1, 2, 3},
			repo.Schema{State: repo.SchemaBehind, Applied: 3, Embedded: 5, Missing: []int64{5}}, "behind (3 < 5)"},
		{"current", []int64{0, 1, 2, 3, 5},
			repo.Schema{State: repo.SchemaCurrent, Applied: 5, Embedded: 5}, "current (5)"},
		{"current in any order", []int64{5, 3, 0, 2, 1},
			repo.Schema{State: repo.SchemaCurrent, Applied: 5, Embedded: 5}, "current (5)"},
		{"ahead", []int64{0, 1, 2, 3, 5, 6, 8},
			repo.Schema{State: repo.SchemaAhead, Applied: 8, Embedded: 5, Unknown: []int64{6, 8}}, "ahead (8 > 5)"},
		{"an unknown version below the newest", []int64{1, 2, 3, 4, 5},
			repo.Schema{State: repo.SchemaAhead, Applied: 5, Embedded: 5, Unknown: []int64{4}}, "ahead (5 applied, unknown [4])"},
		{"a missing version below the newest", []int64{1, 2, 5},
			repo.Schema{State: repo.SchemaBehind, Applied: 5, Embedded: 5, Missing: []int64{3}}, "behind (5 applied, missing [3])"},
		{"missing and unknown is behind", []int64{1, 2, 3, 9},
			repo.Schema{State: repo.SchemaBehind, Applied: 9, Embedded: 5, Missing: []int64{5}, Unknown: []int64{9}}, "behind (9 applied, missing [5])"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := repo.CompareSchema(tt.applied, embedded)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("CompareSchema(%v) = %+v, want %+v", tt.applied, got, tt.want)
			}
			if got.String() != tt.text {
				t.Errorf("String() = %q, want %q", got.String(), tt.text)
			}
		})
	}
}

// emptyDatabases opens, for each supported database, a fresh one without
// any migration.
func emptyDatabases() map[repo.Driver]func(t *testing.T) *gorm.DB {
	open := func(t *testing.T, opts repo.OpenOptions) *gorm.DB {
		t.Helper()
		db, err := repo.Open(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = repo.Close(db) })
		return db
	}
	return map[repo.Driver]func(t *testing.T) *gorm.DB{
		repo.MySQL: func(t *testing.T) *gorm.DB {
			return open(t, repo.OpenOptions{Driver: repo.MySQL, DSN: testutil.MustFreshMySQL(t)})
		},
		repo.SQLite: func(t *testing.T) *gorm.DB {
			return open(t, repo.OpenOptions{Driver: repo.SQLite, DSN: filepath.Join(t.TempDir(), "p.db")})
		},
	}
}

// TestReadSchema follows one database of each kind from empty to current
// to ahead: the read creates nothing on the empty one, and the versions it
// expects are those goose applies.
func TestReadSchema(t *testing.T) {
	ctx := context.Background()
	for driver, open := range emptyDatabases() {
		t.Run(string(driver), func(t *testing.T) {
			db := open(t)
			embedded, err := repo.EmbeddedVersions(driver)
			if err != nil {
				t.Fatal(err)
			}
			newest := embedded[len(embedded)-1]

			got := mustReadSchema(t, db, driver)
			if got.State != repo.SchemaBehind || got.Applied != 0 || got.Embedded != newest {
				t.Fatalf("empty database: %+v, want behind at 0 of %d", got, newest)
			}
			if db.Migrator().HasTable("goose_db_version") {
				t.Fatal("reading the schema created goose's version table")
			}

			done, err := repo.Migrate(ctx, db, driver)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fileVersions(t, done.Applied), embedded) || done.Version != newest {
				t.Fatalf("migrate applied %v up to %d, want the embedded versions %v", done.Applied, done.Version, embedded)
			}
			if got := mustReadSchema(t, db, driver); got.State != repo.SchemaCurrent || got.Applied != newest {
				t.Fatalf("after migrate: %+v, want current at %d", got, newest)
			}

			if err := db.Exec("INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, ?)", newest+1, true).Error; err != nil {
				t.Fatal(err)
			}
			if got := mustReadSchema(t, db, driver); got.State != repo.SchemaAhead || got.Applied != newest+1 {
				t.Fatalf("with a newer version applied: %+v, want ahead at %d", got, newest+1)
			}
			// goose's older down migrations add a row with is_applied false.
			if err := db.Exec("INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, ?)", newest+1, false).Error; err != nil {
				t.Fatal(err)
			}
			if got := mustReadSchema(t, db, driver); got.State != repo.SchemaCurrent || got.Applied != newest {
				t.Fatalf("after the newer version was taken back: %+v, want current at %d", got, newest)
			}
		})
	}
}

// TestReadSchemaFailsOnAClosedDatabase: a database that does not answer is
// an error, never taken for an empty one.
func TestReadSchemaFailsOnAClosedDatabase(t *testing.T) {
	db := emptyDatabases()[repo.SQLite](t)
	if err := repo.Close(db); err != nil {
		t.Fatal(err)
	}
	if s, err := repo.ReadSchema(context.Background(), db, repo.SQLite); err == nil {
		t.Fatalf("ReadSchema on a closed database = %+v, want an error", s)
	}
}

func mustReadSchema(t *testing.T, db *gorm.DB, driver repo.Driver) repo.Schema {
	t.Helper()
	s, err := repo.ReadSchema(context.Background(), db, driver)
	if err != nil {
		t.Fatalf("ReadSchema: %v", err)
	}
	return s
}

// fileVersions is the version of each migration file name (00001_x.sql).
func fileVersions(t *testing.T, names []string) []int64 {
	t.Helper()
	var out []int64
	for _, n := range names {
		v, err := strconv.ParseInt(strings.SplitN(n, "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("migration file %q: %v", n, err)
		}
		out = append(out, v)
	}
	return out
}
