package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"gorm.io/gorm"

	"payserver/internal/decisionlog"
	"payserver/internal/limits"
	"payserver/internal/ratelimit"
	"payserver/internal/repo"
	"payserver/internal/testutil"
	"payserver/internal/whatif"
)

// The what-if table's traffic: one busy key at 1,000 decisions a second
// from 100 merchants, all admitted under a limit above it and replayed
// under a lower one.
const (
	whatIfInForce  = "limits:\n  ONLINE_PAY:ALIPAY: {limit: 2000, window: 1s}\n"
	whatIfProposed = "limits:\n  ONLINE_PAY:ALIPAY: {limit: 800, window: 1s}\n"
)

// whatIf prints, for each -whatif-decisions n, the time to replay n
// recorded decisions of one busy key under a proposed document (with the
// fidelity replay under the document in force, as every what-if does),
// the decisions per second, the peak heap while it ran (flat when it
// streams), and the bytes per decision of the table. The decisions are
// written straight into decision_log (durable commits, 1,000 rows a
// statement), not through payserver: of an SQLite file, or of MariaDB
// (-whatif-db mariadb), whose table it empties first.
func whatIf(o options) error {
	fmt.Printf("== 6. what-if: replay of n recorded decisions of one busy key (1,000/s, 100 merchants), %s decision_log, proposed limit 800/1s over recorded 2000/1s\n", o.whatIfDB)
	fmt.Printf("%12s  %10s  %10s  %14s  %12s  %14s  %10s\n", "decisions", "insert", "replay", "decisions/s", "peak heap", "bytes/decision", "fidelity")
	for _, n := range o.whatIfDecisions {
		if err := whatIfOnce(n, o.whatIfDB); err != nil {
			return err
		}
	}
	return nil
}

// whatIfDatabase opens and migrates the database the decisions are
// recorded into, with its decision_log empty, and returns how to read the
// table's bytes on disk once they are in.
func whatIfDatabase(ctx context.Context, kind, dir string) (*gorm.DB, func() (int64, error), error) {
	driver, dsn := repo.SQLite, filepath.Join(dir, "p.db")
	if kind == "mariadb" {
		driver, dsn = repo.MySQL, os.Getenv("PAYSERVER_TEST_MYSQL_DURABLE_DSN")
		if dsn == "" {
			dsn = os.Getenv("PAYSERVER_TEST_MYSQL_DSN")
		}
		if dsn == "" {
			return nil, nil, errors.New("-whatif-db mariadb needs $PAYSERVER_TEST_MYSQL_DURABLE_DSN or $PAYSERVER_TEST_MYSQL_DSN (run under go run ./internal/testenv/cmd/testenv -services mariadb-durable)")
		}
	}
	db, err := repo.Open(ctx, repo.OpenOptions{Driver: driver, DSN: dsn})
	if err != nil {
		return nil, nil, err
	}
	if _, err := repo.Migrate(ctx, db, driver); err != nil {
		repo.Close(db)
		return nil, nil, err
	}
	if driver == repo.SQLite {
		return db, func() (int64, error) {
			var pages, pageSize int64
			if err := db.Raw("PRAGMA page_count").Scan(&pages).Error; err != nil {
				return 0, err
			}
			err := db.Raw("PRAGMA page_size").Scan(&pageSize).Error
			return pages * pageSize, err
		}, nil
	}
	if err := db.Exec("TRUNCATE TABLE decision_log").Error; err != nil {
		repo.Close(db)
		return nil, nil, err
	}
	return db, func() (int64, error) {
		// InnoDB's own figures, once its statistics are read again: the
		// pages of the table and its indexes.
		// ANALYZE answers rows: read them, not Exec (a prepared Exec
		// waits for an OK that never comes).
		rows, err := db.Raw("ANALYZE TABLE decision_log").Rows()
		if err != nil {
			return 0, err
		}
		for rows.Next() {
		}
		if err := rows.Close(); err != nil {
			return 0, err
		}
		var size int64
		err = db.Raw("SELECT data_length + index_length FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'decision_log'").Scan(&size).Error
		return size, err
	}, nil
}

func whatIfOnce(n int, kind string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "payserver-bench-whatif-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, tableBytes, err := whatIfDatabase(ctx, kind, dir)
	if err != nil {
		return err
	}
	defer repo.Close(db)
	store, err := repo.NewDecisionLog(db)
	if err != nil {
		return err
	}
	inForce, err := limits.Parse([]byte(whatIfInForce))
	if err != nil {
		return err
	}
	if err := store.SaveDocument(ctx, inForce.Config.Version, []byte(whatIfInForce), time.Unix(0, 0)); err != nil {
		return err
	}
	key := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	base := time.Now().Add(-48 * time.Hour).Truncate(time.Second)
	insertStart := time.Now()
	batch := make([]decisionlog.Entry, 0, 1000)
	for i := range n {
		batch = append(batch, decisionlog.Entry{
			At: base.Add(time.Duration(i) * time.Millisecond), Kind: decisionlog.KindDecision, Key: key,
			Member: "R-" + strconv.Itoa(i), Merchant: "M" + strconv.Itoa(i%100), Amount: 1000, Currency: "CNY",
			Outcome: decisionlog.Admitted, Source: ratelimit.SourceRedis, Version: inForce.Config.Version,
		})
		if len(batch) == cap(batch) || i == n-1 {
			if err := store.Insert(ctx, batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	insert := time.Since(insertStart)
	size, err := tableBytes()
	if err != nil {
		return err
	}

	svc, err := whatif.NewService(store)
	if err != nil {
		return err
	}
	var res whatif.Result
	var took time.Duration
	_, peak := testutil.PeakHeap(50*time.Millisecond, func() {
		start := time.Now()
		res, err = svc.WhatIf(ctx, whatif.Query{Document: []byte(whatIfProposed), From: base, To: base.Add(time.Duration(n) * time.Millisecond)})
		took = time.Since(start)
	})
	if err != nil {
		return err
	}
	if len(res.Keys) != 1 || res.Keys[0].Offered != int64(n) || res.Keys[0].NewlyRefused == 0 {
		return fmt.Errorf("replay of %d: %+v, want every decision offered and some newly refused", n, res.Keys)
	}
	fmt.Printf("%12d  %10s  %10s  %14.0f  %9.1f MB  %14.1f  %10.4f\n", n, insert.Round(time.Second), took.Round(100*time.Millisecond),
		float64(n)/took.Seconds(), float64(peak)/(1<<20), float64(size)/float64(n), res.Fidelity)
	return nil
}
