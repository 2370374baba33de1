// Package repo stores payserver's data in MySQL/MariaDB, or SQLite for the
// embedded default, through gorm. Schema changes are goose migrations from
// the top-level migrations folder.
package repo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/glebarez/sqlite"
	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/pressly/goose/v3"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Driver names a database kind.
type Driver string

// Supported drivers.
const (
	MySQL  Driver = "mysql"  // MariaDB or MySQL
	SQLite Driver = "sqlite" // embedded, pure Go
)

// OpenOptions says which database to open.
type OpenOptions struct {
	Driver Driver
	// DSN is a go-sql-driver/mysql DSN for MySQL, or a file path for SQLite.
	DSN string
	// MaxOpenConns caps the pool (default 64 for MySQL; SQLite uses 1).
	MaxOpenConns int
	Logger       *slog.Logger
}

// Open connects to the database and checks that it answers.
func Open(ctx context.Context, opts OpenOptions) (*gorm.DB, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	gcfg := &gorm.Config{
		TranslateError:         true,
		SkipDefaultTransaction: true,
		PrepareStmt:            true,
		Logger: sqlLogger{log: log, Interface: logger.NewSlogLogger(log, logger.Config{
			SlowThreshold:             200 * time.Millisecond,
			LogLevel:                  logger.Warn,
			IgnoreRecordNotFoundError: true,
			ParameterizedQueries:      true, // never log values
		})},
	}
	var dial gorm.Dialector
	maxConns := opts.MaxOpenConns
	switch opts.Driver {
	case MySQL:
		// Rows affected must count the rows an UPDATE matched, as SQLite
		// does, not only those whose values changed: recording the same
		// outcome twice (a retry after a late commit) is not "not found".
		dcfg, err := mysqldriver.ParseDSN(opts.DSN)
		if err != nil {
			return nil, fmt.Errorf("repo: mysql DSN: %w", err)
		}
		dcfg.ClientFoundRows = true
		dial = mysql.Open(dcfg.FormatDSN())
		if maxConns <= 0 {
			maxConns = 64
		}
	case SQLite:
		if err := os.MkdirAll(filepath.Dir(opts.DSN), 0o750); err != nil {
			return nil, fmt.Errorf("repo: sqlite dir: %w", err)
		}
		// synchronous=FULL: every commit is on disk before it returns, so
		// every 2xx has a durable order. WAL with NORMAL (the previous
		// setting) can lose the last commits on a power loss.
		dial = sqlite.Open(opts.DSN + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(FULL)")
		maxConns = 1
	default:
		return nil, fmt.Errorf("repo: unknown driver %q", opts.Driver)
	}
	db, err := gorm.Open(dial, gcfg)
	if err != nil {
		return nil, fmt.Errorf("repo: open %s: %w", opts.Driver, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(maxConns)
	sqlDB.SetMaxIdleConns(maxConns)
	sqlDB.SetConnMaxLifetime(30 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := sqlDB.PingContext(pctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("repo: %s does not answer: %w", opts.Driver, err)
	}
	return db, nil
}

// Migrated says what Migrate did.
type Migrated struct {
	// Applied names the migrations applied, in order, by file name
	// (00001_orders.sql); empty when there was nothing to do.
	Applied []string
	// Version is the newest version applied to the database afterwards.
	Version int64
}

// Migrate applies every pending migration for the driver and says which.
func Migrate(ctx context.Context, db *gorm.DB, driver Driver) (Migrated, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return Migrated{}, err
	}
	var dialect goose.Dialect
	switch driver {
	case MySQL:
		dialect = goose.DialectMySQL
	case SQLite:
		dialect = goose.DialectSQLite3
	default:
		return Migrated{}, fmt.Errorf("repo: unknown driver %q", driver)
	}
	sub, err := fsSub(string(driver))
	if err != nil {
		return Migrated{}, err
	}
	p, err := goose.NewProvider(dialect, sqlDB, sub)
	if err != nil {
		return Migrated{}, fmt.Errorf("repo: migrations: %w", err)
	}
	results, err := p.Up(ctx)
	if partial := (*goose.PartialError)(nil); errors.As(err, &partial) {
		results = partial.Applied
	}
	var done Migrated
	for _, r := range results {
		done.Applied = append(done.Applied, path.Base(r.Source.Path))
	}
	if err != nil {
		return done, fmt.Errorf("repo: migrate: %w", err)
	}
	if done.Version, err = p.GetDBVersion(ctx); err != nil {
		return done, fmt.Errorf("repo: migrated version: %w", err)
	}
	return done, nil
}

// Ping checks that the database answers within a second.
func Ping(ctx context.Context, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return sqlDB.PingContext(pctx)
}

// Close closes the pool.
func Close(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

var errNoMigrations = errors.New("repo: no migrations for driver")
