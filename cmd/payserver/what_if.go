package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"gorm.io/gorm"

	"payserver/internal/ratelimit"
	"payserver/internal/repo"
	"payserver/internal/whatif"
)

const whatIfUsage = `usage: payserver what-if PROPOSED.yaml [--from RFC3339] [--to RFC3339] [--key BIZTYPE:CHANNEL]... [--json]

Replays the decisions payserver recorded (the decision log) under the
proposed limits document, through the model of the limiter's rules, and
prints per key what it would have admitted and refused, whom it would have
refused newly and the busiest minute; then the fidelity of the replay under
the documents actually in force. Default: the last 24 hours. It reads the
database payserver is configured with (PAYSERVER_MYSQL_DSN, or the data dir).
`

// keysFlag collects --key values.
type keysFlag []ratelimit.Key

func (k *keysFlag) String() string { return fmt.Sprint(*k) }

func (k *keysFlag) Set(s string) error {
	key, err := ratelimit.ParseKey(s)
	if err != nil {
		return err
	}
	*k = append(*k, key)
	return nil
}

// whatIfCmd runs `payserver what-if`.
func whatIfCmd(args []string, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("what-if", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	from := fs.String("from", "", "")
	to := fs.String("to", "", "")
	asJSON := fs.Bool("json", false, "")
	var keys keysFlag
	fs.Var(&keys, "key", "")
	var file string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, whatIfUsage)
			return 0
		}
		fmt.Fprintf(stderr, "payserver what-if: %v\n%s", err, whatIfUsage)
		return 2
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 || file == "" {
		fmt.Fprintf(stderr, "payserver what-if: name one proposed document\n%s", whatIfUsage)
		return 2
	}
	now := time.Now()
	q := whatif.Query{From: now.Add(-24 * time.Hour), To: now, Keys: keys}
	for _, f := range []struct {
		name, value string
		into        *time.Time
	}{{"--from", *from, &q.From}, {"--to", *to, &q.To}} {
		if f.value == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, f.value)
		if err != nil {
			fmt.Fprintf(stderr, "payserver what-if: %s %q is not an RFC 3339 time\n", f.name, f.value)
			return 2
		}
		*f.into = t
	}
	var err error
	if file == "-" {
		q.Document, err = io.ReadAll(os.Stdin)
	} else {
		q.Document, err = os.ReadFile(file)
	}
	if err != nil {
		fmt.Fprintf(stderr, "payserver what-if: %v\n", err)
		return 2
	}
	cfg, err := LoadConfig(environ)
	if err != nil {
		fmt.Fprintf(stderr, "payserver what-if: %v\n", err)
		return 2
	}
	ctx := context.Background()
	db, code := openCommandDB(ctx, "what-if", cfg, stderr)
	if db == nil {
		return code
	}
	defer func() { _ = repo.Close(db) }()
	store, err := repo.NewDecisionLog(db)
	if err != nil {
		fmt.Fprintf(stderr, "payserver what-if: %v\n", err)
		return 1
	}
	svc, err := whatif.NewService(store)
	if err != nil {
		fmt.Fprintf(stderr, "payserver what-if: %v\n", err)
		return 1
	}
	res, err := svc.WhatIf(ctx, q)
	if err != nil {
		fmt.Fprintf(stderr, "payserver what-if: %v\n", err)
		return 1
	}
	if *asJSON {
		if err := writeJSON(stdout, res); err != nil {
			return 1
		}
		// The fidelity, and below 0.99 its differences, go to stderr: the
		// JSON is exactly the documented shape.
		_ = whatif.WriteFidelity(stderr, res)
		return 0
	}
	if err := whatif.WriteText(stdout, res); err != nil {
		return 1
	}
	return 0
}

// openCommandDB opens the database cfg names for the command cmd (report,
// what-if), printing why not on stderr; it returns nil and the exit code
// when it cannot.
func openCommandDB(ctx context.Context, cmd string, cfg Config, stderr io.Writer) (*gorm.DB, int) {
	log := newLogger(cfg, stderr)
	opts, err := dbOpenOptions(cfg, log.With("component", "db"))
	if err != nil {
		fmt.Fprintf(stderr, "payserver %s: %v\n", cmd, err)
		return nil, 2
	}
	if opts.Driver == repo.SQLite {
		if _, err := os.Stat(opts.DSN); err != nil {
			fmt.Fprintf(stderr, "payserver %s: no embedded database at %s (set PAYSERVER_DATA_DIR, or PAYSERVER_MYSQL_DSN for MySQL)\n", cmd, opts.DSN)
			return nil, 1
		}
	}
	db, err := openDatabase(ctx, cfg, opts)
	if err != nil {
		fmt.Fprintf(stderr, "payserver %s: %v\n", cmd, err)
		return nil, 1
	}
	return db, 0
}
