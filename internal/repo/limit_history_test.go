package repo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"payserver/internal/configcenter"
	"payserver/internal/repo"
	"payserver/internal/repo/repotest"
)

// TestLimitHistoryKeepsAppliedAndRefused records a load, a refusal and a
// change on every database, and pages them back newest first with kind,
// diff and refusal reason intact.
func TestLimitHistoryKeepsAppliedAndRefused(t *testing.T) {
	for name, open := range databases() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			h, err := repo.NewLimitHistory(open(t), "host/127.0.0.1:1")
			if err != nil {
				t.Fatal(err)
			}
			at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
			long := strings.Repeat("é", 3000)
			in := []configcenter.Change{
				{At: at, Kind: configcenter.KindLoad, Source: "file", Name: "f", MD5: "m1", Keys: []string{"A:B: absent -> 5/1s"}},
				{At: at.Add(time.Second), Kind: configcenter.KindRefused, Source: "file", Name: "f", MD5: "m2", Refusal: "limits.A:B: not a number"},
				{At: at.Add(2 * time.Second), Kind: configcenter.KindRefused, Source: "nacos", Name: "G/d", Refusal: long},
				{At: at.Add(3 * time.Second), Kind: configcenter.KindChange, Source: "file", Name: "f", MD5: "m3", Keys: []string{"A:B: 5/1s -> 6/1s"}},
				// The longest kind fits the column (VARCHAR(16) on MariaDB).
				{At: at.Add(4 * time.Second), Kind: configcenter.KindLearnedReset, Source: "admin", Name: "A:B",
					Keys: []string{"A:B count/1s: learned 3 of 6 since 2026-03-01T10:00:03Z -> reset"}},
			}
			for _, c := range in {
				if err := h.Record(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			first, err := h.Page(ctx, 0, 3)
			if err != nil {
				t.Fatal(err)
			}
			rest, err := h.Page(ctx, first[len(first)-1].ID, 3)
			if err != nil {
				t.Fatal(err)
			}
			got := append(first, rest...)
			if len(first) != 3 || len(got) != 5 {
				t.Fatalf("pages of %d and %d entries, want 3 and 2", len(first), len(rest))
			}
			for i, g := range got {
				w := in[len(in)-1-i]
				if g.Kind != w.Kind || g.MD5 != w.MD5 || !g.At.Equal(w.At) || strings.Join(g.Keys, ";") != strings.Join(w.Keys, ";") ||
					g.Instance != "host/127.0.0.1:1" || g.ID == 0 {
					t.Errorf("entry %d = %+v, want %+v", i, g, w)
				}
				if w.Refusal != long && g.Refusal != w.Refusal {
					t.Errorf("entry %d refusal %q, want %q", i, g.Refusal, w.Refusal)
				}
			}
			if r := got[2].Refusal; len([]rune(r)) != 2000 || !strings.HasSuffix(r, "…") {
				t.Errorf("a long refusal is stored as %d runes, want 2000 ending in …", len([]rune(r)))
			}
		})
	}
}

// TestLimitHistoryShowsUnreadableKeys: a change whose recorded keys are not
// the JSON array written at Record (a hand edit, a cut column) is shown
// with one key saying so, not as a change that touched no key.
func TestLimitHistoryShowsUnreadableKeys(t *testing.T) {
	for name, open := range repotest.Databases() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db := open(t)
			h, err := repo.NewLimitHistory(db, "host/127.0.0.1:1")
			if err != nil {
				t.Fatal(err)
			}
			at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
			if err := h.Record(ctx, configcenter.Change{At: at, Kind: configcenter.KindChange, Source: "file", Name: "f", MD5: "m1", Keys: []string{"A:B: 5/1s -> 6/1s"}}); err != nil {
				t.Fatal(err)
			}
			if err := db.Exec("UPDATE limit_config_history SET changed_keys = ?", `["A:B: 5/1s`).Error; err != nil {
				t.Fatal(err)
			}
			got, err := h.Page(ctx, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || len(got[0].Keys) != 1 || !strings.HasPrefix(got[0].Keys[0], "(the keys recorded for this change cannot be read: ") {
				t.Fatalf("got %+v, want one change whose one key says its keys cannot be read", got)
			}
		})
	}
}
