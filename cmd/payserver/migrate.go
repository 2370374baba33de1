package main

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"

	"payserver/internal/repo"
)

// migrateOnly applies the migrations of the configured database and exits.
func migrateOnly(ctx context.Context, cfg Config, log *slog.Logger) error {
	opts := repo.OpenOptions{Driver: repo.MySQL, DSN: cfg.MySQLDSN, Logger: log}
	if cfg.MySQLDSN == "" {
		opts.Driver, opts.DSN = repo.SQLite, filepath.Join(cfg.DataDir, "payserver.db")
	}
	db, err := repo.Open(ctx, opts)
	if err != nil {
		return err
	}
	err = repo.Migrate(ctx, db, opts.Driver)
	if cerr := repo.Close(db); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err == nil {
		log.Info("migrations applied", "driver", string(opts.Driver))
	}
	return err
}
