package main

import (
	"context"
	"errors"
	"log/slog"

	"payserver/internal/repo"
)

// migrateOnly applies the migrations of the configured database and exits.
func migrateOnly(ctx context.Context, cfg Config, log *slog.Logger) error {
	opts, err := dbOpenOptions(cfg, log)
	if err != nil {
		return err
	}
	db, err := openDatabase(ctx, cfg, opts)
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
