package repo_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"payserver/internal/pay"
	"payserver/internal/repo"
	"payserver/internal/testutil"
)

// TestDuplicateClaimIsNotLoggedAsError: a concurrent duplicate requestId is
// an expected conflict (ErrDuplicateOrder, answered by the pay flow), so the
// database layer does not log it at error level.
func TestDuplicateClaimIsNotLoggedAsError(t *testing.T) {
	for name, opts := range map[string]func(t *testing.T) repo.OpenOptions{
		"sqlite": func(t *testing.T) repo.OpenOptions {
			return repo.OpenOptions{Driver: repo.SQLite, DSN: filepath.Join(t.TempDir(), "p.db")}
		},
		"mariadb": func(t *testing.T) repo.OpenOptions {
			return repo.OpenOptions{Driver: repo.MySQL, DSN: testutil.MustFreshMySQL(t)}
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var logs testutil.LogBuffer
			o := opts(t)
			o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			db, err := repo.Open(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = repo.Close(db) })
			if _, err := repo.Migrate(ctx, db, o.Driver); err != nil {
				t.Fatal(err)
			}
			s, err := repo.NewOrdersWithOptions(db, repo.OrdersOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Create(ctx, newOrder("dup-1")); err != nil {
				t.Fatal(err)
			}
			if err := s.Create(ctx, newOrder("dup-1")); !errors.Is(err, pay.ErrDuplicateOrder) {
				t.Fatalf("second claim: %v, want ErrDuplicateOrder", err)
			}
			l := logs.String()
			if strings.Contains(l, "level=ERROR") {
				t.Errorf("an expected duplicate was logged as an error:\n%s", l)
			}
			if !strings.Contains(l, "SQL statement failed") || !strings.Contains(l, "VALUES (?, ?") {
				t.Errorf("want the failed statement at debug level, parameterized (no values):\n%s", l)
			}
		})
	}
}
