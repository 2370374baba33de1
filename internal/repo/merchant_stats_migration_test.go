package repo_test

import (
	"context"
	"io/fs"
	"testing"

	"github.com/pressly/goose/v3"

	"payserver/internal/repo"
	"payserver/internal/testutil"
	"payserver/migrations"
)

// TestMerchantStatsRollBackWithMerchantsApart: on MariaDB, once merchants
// that differ only in a trailing space have rows of their own, a rollback
// of the migration that keeps them apart still succeeds, and keeps them
// apart.
func TestMerchantStatsRollBackWithMerchantsApart(t *testing.T) {
	ctx := context.Background()
	db, err := repo.Open(ctx, repo.OpenOptions{Driver: repo.MySQL, DSN: testutil.MustFreshMySQL(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = repo.Close(db) })
	if _, err := repo.Migrate(ctx, db, repo.MySQL); err != nil {
		t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"M1", "M1 "} {
		if _, err := sqlDB.Exec("INSERT INTO channel_merchant_stats (minute, biz_type, channel, merchant, admitted, refused, updated_at) VALUES (1, 'PAY', 'ALIPAY', ?, 1, 0, NOW(6))", m); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := fs.Sub(migrations.FS, "mysql")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectMySQL, sqlDB, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 11); err != nil {
		t.Fatalf("rolling back to version 11: %v", err)
	}
	var n int
	if err := sqlDB.QueryRow("SELECT COUNT(DISTINCT merchant) FROM channel_merchant_stats").Scan(&n); err != nil || n != 2 {
		t.Errorf("%d merchants after the rollback (%v), want 2", n, err)
	}
}
