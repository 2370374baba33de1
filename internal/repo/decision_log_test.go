package repo_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"payserver/internal/decisionlog"
	"payserver/internal/ratelimit"
	"payserver/internal/repo"
	"payserver/internal/testutil"
)

// TestDecisionLogWritesReadsAndPrunes writes entries on every database,
// the MariaDB user holding exactly the documented serving grants among
// them (pruning is the one DELETE serving does), counts and streams them
// back in order, and prunes the old ones in batches.
func TestDecisionLogWritesReadsAndPrunes(t *testing.T) {
	key := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	base := time.UnixMicro(1_700_000_000_000_000)
	for name, open := range databases() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := repo.NewDecisionLog(open(t))
			if err != nil {
				t.Fatal(err)
			}
			var entries []decisionlog.Entry
			for i := range 7 {
				entries = append(entries, decisionlog.Entry{
					At: base.Add(time.Duration(6-i) * time.Minute), Kind: decisionlog.KindDecision, Key: key,
					Member: "R-" + string(rune('a'+i)), Merchant: "M1", Amount: 100, Currency: "CNY",
					Outcome: decisionlog.Admitted, Source: ratelimit.SourceRedis, Version: "v1",
				})
			}
			if err := s.Insert(ctx, entries); err != nil {
				t.Fatal(err)
			}
			if err := s.SaveDocument(ctx, "v1", []byte("limits: {}\n"), base); err != nil {
				t.Fatal(err)
			}
			if err := s.SaveDocument(ctx, "v1", []byte("other"), base); err != nil {
				t.Fatalf("a version kept already: %v, want it left as it is", err)
			}
			if docs, err := s.Documents(ctx); err != nil || string(docs["v1"]) != "limits: {}\n" {
				t.Errorf("Documents = %q, %v; want v1 as first kept", docs, err)
			}
			all := decisionlog.Filter{From: base.Add(-time.Hour), To: base.Add(time.Hour)}
			var at []time.Time
			if err := s.Stream(ctx, all, func(e decisionlog.Entry) error { at = append(at, e.At); return nil }); err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(at); i++ {
				if at[i].Before(at[i-1]) {
					t.Fatalf("streamed out of order: %v", at)
				}
			}

			// Prune the 5 entries older than base+5m, 2 a statement.
			before := base.Add(5 * time.Minute)
			var deleted []int
			for {
				n, err := s.Prune(ctx, before, 2)
				if err != nil {
					t.Fatalf("Prune: %v (the serving user needs DELETE on decision_log)", err)
				}
				deleted = append(deleted, n)
				if n < 2 {
					break
				}
			}
			if want := []int{2, 2, 1}; len(deleted) != 3 || deleted[0] != 2 || deleted[1] != 2 || deleted[2] != 1 {
				t.Errorf("Prune deleted %v, want %v", deleted, want)
			}
			if n, err := s.Count(ctx, all); err != nil || n != 2 {
				t.Errorf("Count after pruning = %d, %v; want the 2 entries at or after the cut", n, err)
			}
		})
	}
}

// With prepared statements on, every text of an INSERT is a statement of
// its own on each connection, and MariaDB caps them server-wide: batches
// of every size from 1 to 100, and one of 1,000, are written whole with
// INSERTs of a few sizes only.
func TestDecisionLogInsertsInAFewStatementSizes(t *testing.T) {
	key := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	base := time.UnixMicro(1_700_000_000_000_000)
	for name, open := range databases() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db := open(t)
			s, err := repo.NewDecisionLog(db)
			if err != nil {
				t.Fatal(err)
			}
			written := 0
			batch := func(n int) {
				entries := make([]decisionlog.Entry, n)
				for i := range entries {
					entries[i] = decisionlog.Entry{At: base.Add(time.Duration(written+i) * time.Microsecond), Kind: decisionlog.KindDecision, Key: key,
						Member: fmt.Sprintf("R-%d", written+i), Outcome: decisionlog.Refused, Source: ratelimit.SourceRedis, Version: "v1"}
				}
				if err := s.Insert(ctx, entries); err != nil {
					t.Fatalf("a batch of %d: %v", n, err)
				}
				written += n
			}
			for n := 1; n <= 100; n++ {
				batch(n)
			}
			batch(1000)
			all := decisionlog.Filter{From: base, To: base.Add(time.Hour)}
			if n, err := s.Count(ctx, all); err != nil || n != int64(written) {
				t.Fatalf("%d entries read back (%v), want %d", n, err, written)
			}
			p, ok := db.ConnPool.(*gorm.PreparedStmtDB)
			if !ok {
				t.Fatalf("the database's pool is %T, want prepared statements on", db.ConnPool)
			}
			sizes := 0
			for _, q := range p.Stmts.Keys() {
				if strings.HasPrefix(q, "INSERT INTO decision_log") {
					sizes++
				}
			}
			// 1, 2, 4, …, 512 rows.
			if sizes > 10 {
				t.Fatalf("%d INSERT statements prepared for batches of 1 to 100 and 1,000 rows, want at most 10", sizes)
			}
		})
	}
}

// On MariaDB the INSERTs' statements are prepared once per connection:
// batches written again prepare nothing more (a transaction's statements
// would be prepared again on every call).
func TestDecisionLogPreparesItsInsertsOnce(t *testing.T) {
	ctx := context.Background()
	db, err := repo.Open(ctx, repo.OpenOptions{Driver: repo.MySQL, DSN: testutil.MustFreshMySQL(t), MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = repo.Close(db) })
	if _, err := repo.Migrate(ctx, db, repo.MySQL); err != nil {
		t.Fatal(err)
	}
	s, err := repo.NewDecisionLog(db)
	if err != nil {
		t.Fatal(err)
	}
	key := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	at := time.UnixMicro(1_700_000_000_000_000)
	batches := func() {
		for _, n := range []int{1000, 777, 3, 1} {
			entries := make([]decisionlog.Entry, n)
			for i := range entries {
				at = at.Add(time.Microsecond)
				entries[i] = decisionlog.Entry{At: at, Kind: decisionlog.KindDecision, Key: key, Member: "R", Outcome: decisionlog.Refused, Source: ratelimit.SourceRedis, Version: "v1"}
			}
			if err := s.Insert(ctx, entries); err != nil {
				t.Fatalf("a batch of %d: %v", n, err)
			}
		}
	}
	// The one connection's own count of prepared statements (the read
	// itself is prepared on its first call).
	prepared := func() int64 {
		var row struct {
			VariableName string `gorm:"column:Variable_name"`
			Value        int64  `gorm:"column:Value"`
		}
		if err := db.Raw("SHOW SESSION STATUS LIKE 'Com_stmt_prepare'").Scan(&row).Error; err != nil {
			t.Fatal(err)
		}
		return row.Value
	}
	batches()
	before := prepared()
	batches()
	if n := prepared() - before; n != 0 {
		t.Fatalf("the same batches written again prepared %d statements, want none", n)
	}
}
