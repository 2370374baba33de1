package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"payserver/internal/repo"
)

const migrateUsage = `usage: payserver migrate

Applies the migrations this binary embeds that the configured database
lacks (PAYSERVER_MYSQL_DSN, else the SQLite file in PAYSERVER_DATA_DIR),
prints each one applied and the version reached, or "already at N" when
there is nothing to do, and exits. It needs DDL privileges; serving needs
only SELECT, INSERT, UPDATE and DELETE.
`

// migrateHelp answers `payserver migrate ARGS…`: migrate takes no
// arguments, so it prints the usage, on stdout for a request of help (exit
// 0), else on stderr (exit 2). It never migrates.
func migrateHelp(args []string, stdout, stderr io.Writer) int {
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, migrateUsage)
		return 0
	}
	fmt.Fprintf(stderr, "payserver migrate: unexpected argument %q\n%s", args[0], migrateUsage)
	return 2
}

// migrateOnly applies the migrations of the configured database, prints
// what it did to stdout, and exits.
func migrateOnly(ctx context.Context, cfg Config, log *slog.Logger, stdout io.Writer) error {
	opts, err := dbOpenOptions(cfg, log)
	if err != nil {
		return err
	}
	db, err := openDatabase(ctx, cfg, opts)
	if err != nil {
		return err
	}
	done, err := repo.Migrate(ctx, db, opts.Driver)
	if cerr := repo.Close(db); cerr != nil {
		err = errors.Join(err, cerr)
	}
	for _, name := range done.Applied {
		fmt.Fprintf(stdout, "applied %s\n", name)
	}
	if err != nil {
		return err
	}
	if len(done.Applied) == 0 {
		fmt.Fprintf(stdout, "already at %d\n", done.Version)
	} else {
		fmt.Fprintf(stdout, "schema at version %d\n", done.Version)
	}
	log.Info("migrations applied", "driver", string(opts.Driver), "applied", len(done.Applied), "version", done.Version)
	return nil
}
