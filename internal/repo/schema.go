package repo

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"

	"github.com/pressly/goose/v3"
	"gorm.io/gorm"
)

// This file compares a database's schema with the migrations this binary
// embeds, reading only: serving needs no DDL privilege, so it never creates
// goose's version table, as goose's own status and version commands do.

// versionTable is where goose records the migrations it applied.
const versionTable = goose.DefaultTablename

// SchemaState says how a database's schema compares with the migrations
// this binary embeds.
type SchemaState int

const (
	// SchemaCurrent: every embedded migration is applied, and no other.
	SchemaCurrent SchemaState = iota
	// SchemaBehind: an embedded migration is not applied. An empty database
	// (no version table) is behind.
	SchemaBehind
	// SchemaAhead: every embedded migration is applied, and others this
	// binary does not know: a newer payserver migrated the database (a
	// rollback of the binary after a migration).
	SchemaAhead
)

// Schema is a database's schema compared with this binary's migrations.
// The zero value is a current schema at version 0.
type Schema struct {
	State SchemaState
	// Applied is the newest version applied to the database; 0 when none
	// is, or when there is no version table.
	Applied int64
	// Embedded is the newest version this binary embeds.
	Embedded int64
	// Missing lists the embedded versions not applied, in order.
	Missing []int64
	// Unknown lists the applied versions this binary does not embed, in
	// order.
	Unknown []int64
}

// String says how the schema compares, e.g. "behind (0 < 7)",
// "ahead (8 > 7)" or "current (7)".
func (s Schema) String() string {
	switch s.State {
	case SchemaBehind:
		if s.Applied < s.Embedded {
			return fmt.Sprintf("behind (%d < %d)", s.Applied, s.Embedded)
		}
		return fmt.Sprintf("behind (%d applied, missing %v)", s.Applied, s.Missing)
	case SchemaAhead:
		if s.Applied > s.Embedded {
			return fmt.Sprintf("ahead (%d > %d)", s.Applied, s.Embedded)
		}
		return fmt.Sprintf("ahead (%d applied, unknown %v)", s.Applied, s.Unknown)
	default:
		return fmt.Sprintf("current (%d)", s.Applied)
	}
}

// CompareSchema compares the versions applied to a database with those
// embedded in the binary (both in any order; version 0, goose's initial
// row, is ignored). Behind wins over ahead: a migration this binary needs
// is missing, whatever else was applied.
func CompareSchema(applied, embedded []int64) Schema {
	have := make(map[int64]bool, len(applied))
	var s Schema
	for _, v := range applied {
		if v > 0 {
			have[v] = true
			s.Applied = max(s.Applied, v)
		}
	}
	known := make(map[int64]bool, len(embedded))
	for _, v := range embedded {
		known[v] = true
		s.Embedded = max(s.Embedded, v)
		if !have[v] {
			s.Missing = append(s.Missing, v)
		}
	}
	for v := range have {
		if !known[v] {
			s.Unknown = append(s.Unknown, v)
		}
	}
	slices.Sort(s.Missing)
	slices.Sort(s.Unknown)
	switch {
	case len(s.Missing) > 0:
		s.State = SchemaBehind
	case len(s.Unknown) > 0:
		s.State = SchemaAhead
	}
	return s
}

// ReadSchema compares the database's applied migrations with those this
// binary embeds for driver. It only reads (SELECT): a database without
// goose's version table is at version 0, and is left without one.
func ReadSchema(ctx context.Context, db *gorm.DB, driver Driver) (Schema, error) {
	embedded, err := EmbeddedVersions(driver)
	if err != nil {
		return Schema{}, err
	}
	applied, err := appliedVersions(ctx, db, driver)
	if err != nil {
		return Schema{}, err
	}
	return CompareSchema(applied, embedded), nil
}

// EmbeddedVersions lists the versions of the migrations this binary embeds
// for driver, in order.
func EmbeddedVersions(driver Driver) ([]int64, error) {
	sub, err := fsSub(string(driver))
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(sub, ".")
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", errNoMigrations, driver, err)
	}
	var versions []int64
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		v, err := goose.NumericComponent(e.Name())
		if err != nil {
			return nil, fmt.Errorf("repo: migration %s/%s: %w", driver, e.Name(), err)
		}
		versions = append(versions, v)
	}
	if len(versions) == 0 {
		return nil, fmt.Errorf("%w %s", errNoMigrations, driver)
	}
	slices.Sort(versions)
	return versions, nil
}

// appliedVersions reads the versions goose applied, in order. A row with
// is_applied false (goose's older down migrations) takes back the
// version's earlier rows.
func appliedVersions(ctx context.Context, db *gorm.DB, driver Driver) ([]int64, error) {
	exists, err := hasVersionTable(ctx, db, driver)
	if err != nil || !exists {
		return nil, err
	}
	rows, err := db.WithContext(ctx).Raw("SELECT version_id, is_applied FROM " + versionTable + " ORDER BY id").Rows()
	if err != nil {
		return nil, fmt.Errorf("repo: read %s: %w", versionTable, err)
	}
	defer rows.Close()
	have := map[int64]bool{}
	for rows.Next() {
		var v int64
		var applied bool
		if err := rows.Scan(&v, &applied); err != nil {
			return nil, fmt.Errorf("repo: read %s: %w", versionTable, err)
		}
		if applied {
			have[v] = true
		} else {
			delete(have, v)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("repo: read %s: %w", versionTable, err)
	}
	versions := make([]int64, 0, len(have))
	for v := range have {
		versions = append(versions, v)
	}
	slices.Sort(versions)
	return versions, nil
}

// hasVersionTable asks the catalog whether goose's version table exists,
// so that a database error is never taken for an empty database.
func hasVersionTable(ctx context.Context, db *gorm.DB, driver Driver) (bool, error) {
	var q string
	switch driver {
	case MySQL:
		q = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?"
	case SQLite:
		q = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?"
	default:
		return false, fmt.Errorf("repo: unknown driver %q", driver)
	}
	var n int64
	if err := db.WithContext(ctx).Raw(q, versionTable).Scan(&n).Error; err != nil {
		return false, fmt.Errorf("repo: look for %s: %w", versionTable, err)
	}
	return n > 0, nil
}
