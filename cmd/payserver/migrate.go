package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	mysqldriver "github.com/go-sql-driver/mysql"

	"payserver/internal/repo"
)

const migrateUsage = `usage: payserver migrate

Applies the migrations this binary embeds that the configured database
lacks (PAYSERVER_MYSQL_DSN, else the SQLite file in PAYSERVER_DATA_DIR),
and exits. It first prints which database it migrates (the driver, then
user@host:port/database or the SQLite path; never a password), then each
migration applied and "schema at version N (was M)", or "already at N"
when there is nothing to do. It needs DDL privileges; serving needs
only SELECT, INSERT and UPDATE, and DELETE on decision_log to prune it
(docs/OPERATIONS.md, "Least privilege").
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
	note := ""
	if opts.Driver == repo.SQLite {
		note = "PAYSERVER_MYSQL_DSN is empty: the embedded SQLite file"
	}
	fmt.Fprintf(stdout, "migrating %s\n", describeDatabase(opts, note))
	db, err := openDatabase(ctx, cfg, opts)
	if err != nil {
		return err
	}
	before, err := repo.ReadSchema(ctx, db, opts.Driver)
	if err != nil {
		return errors.Join(err, repo.Close(db))
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
		fmt.Fprintf(stdout, "schema at version %d (was %d)\n", done.Version, before.Applied)
	}
	log.Info("migrations applied", "database", describeDatabase(opts, ""), "applied", len(done.Applied),
		"from", before.Applied, "version", done.Version)
	return nil
}

// describeDatabase names the database opts open, for people and never with
// a password: "sqlite /data/payserver.db", "mysql
// payserver@db.internal:3306/payserver"; note, when set, follows in
// parentheses.
func describeDatabase(opts repo.OpenOptions, note string) string {
	s := string(opts.Driver) + " " + opts.DSN
	if opts.Driver == repo.MySQL {
		s = string(opts.Driver) + " (a DSN that does not parse)"
		if c, err := mysqldriver.ParseDSN(opts.DSN); err == nil {
			addr := c.Addr
			if c.Net != "tcp" {
				addr = c.Net + "(" + c.Addr + ")"
			}
			s = string(opts.Driver) + " " + c.User + "@" + addr + "/" + c.DBName
		}
	}
	if note != "" {
		s += " (" + note + ")"
	}
	return s
}
