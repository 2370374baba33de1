package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"payserver/internal/decisionlog"
	"payserver/internal/limits"
	"payserver/internal/ratelimit"
	"payserver/internal/repo"
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
// written straight into decision_log of an SQLite file (durable commits,
// 1,000 rows a statement), not through payserver.
func whatIf(o options) error {
	fmt.Println("== 6. what-if: replay of n recorded decisions of one busy key (1,000/s, 100 merchants), SQLite decision_log, proposed limit 800/1s over recorded 2000/1s")
	fmt.Printf("%12s  %10s  %10s  %14s  %12s  %14s  %10s\n", "decisions", "insert", "replay", "decisions/s", "peak heap", "bytes/decision", "fidelity")
	for _, n := range o.whatIfDecisions {
		if err := whatIfOnce(n); err != nil {
			return err
		}
	}
	return nil
}

func whatIfOnce(n int) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "payserver-bench-whatif-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := repo.Open(ctx, repo.OpenOptions{Driver: repo.SQLite, DSN: filepath.Join(dir, "p.db")})
	if err != nil {
		return err
	}
	defer repo.Close(db)
	if _, err := repo.Migrate(ctx, db, repo.SQLite); err != nil {
		return err
	}
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
	var pages, pageSize int64
	if err := db.Raw("PRAGMA page_count").Scan(&pages).Error; err != nil {
		return err
	}
	if err := db.Raw("PRAGMA page_size").Scan(&pageSize).Error; err != nil {
		return err
	}

	svc, err := whatif.NewService(store)
	if err != nil {
		return err
	}
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	res, err := svc.WhatIf(ctx, whatif.Query{Document: []byte(whatIfProposed), From: base, To: base.Add(time.Duration(n) * time.Millisecond)})
	took := time.Since(start)
	close(stop)
	<-sampled
	if err != nil {
		return err
	}
	if len(res.Keys) != 1 || res.Keys[0].Offered != int64(n) || res.Keys[0].NewlyRefused == 0 {
		return fmt.Errorf("replay of %d: %+v, want every decision offered and some newly refused", n, res.Keys)
	}
	fmt.Printf("%12d  %10s  %10s  %14.0f  %9.1f MB  %14.1f  %10.4f\n", n, insert.Round(time.Second), took.Round(100*time.Millisecond),
		float64(n)/took.Seconds(), float64(peak.Load())/(1<<20), float64(pages*pageSize)/float64(n), res.Fidelity)
	return nil
}
