package httpapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"payserver/internal/configcenter"
	"payserver/internal/console/consoletest"
	"payserver/internal/httpapi"
)

// fakeHistory pages a fixed list, oldest first in memory.
type fakeHistory []configcenter.Change

func (h fakeHistory) Page(_ context.Context, before uint64, limit int) ([]configcenter.Change, error) {
	var out []configcenter.Change
	for i := len(h) - 1; i >= 0 && len(out) < limit; i-- {
		if before == 0 || h[i].ID < before {
			out = append(out, h[i])
		}
	}
	return out, nil
}

func TestLimitsHistoryRoute(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	h := fakeHistory{
		{ID: 1, At: at, Kind: configcenter.KindLoad, Source: "file", Name: "f", MD5: "m1", Keys: []string{"A:B: absent -> 5/1s"}, Instance: "i1"},
		{ID: 2, At: at.Add(time.Second), Kind: configcenter.KindRefused, Source: "file", Name: "f", MD5: "m2", Refusal: "limits.A:B: bad", Instance: "i1"},
		{ID: 3, At: at.Add(2 * time.Second), Kind: configcenter.KindChange, Source: "file", Name: "f", MD5: "m3", Keys: []string{"A:B: 5/1s -> 6/1s"}, Instance: "i1"},
	}
	routes, err := httpapi.LimitsHistoryRoutes(h, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s := consoletest.ServeAdmin(t, "tok", routes)

	type page struct {
		Entries []struct {
			ID      uint64   `json:"id"`
			Kind    string   `json:"kind"`
			Version string   `json:"version"`
			Diff    []string `json:"diff"`
			Refusal *string  `json:"refusal"`
		} `json:"entries"`
		NextBefore *uint64 `json:"nextBefore"`
	}
	get := func(q string) page {
		a := s.Get(t, "/limits/history"+q, "tok")
		if a.Status != 200 {
			t.Fatalf("%s: status %d: %s", q, a.Status, a.Body)
		}
		var p page
		if err := json.Unmarshal([]byte(a.Body), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p1 := get("?limit=2")
	if len(p1.Entries) != 2 || p1.Entries[0].Kind != "change" || p1.Entries[1].Kind != "refused" ||
		p1.Entries[1].Refusal == nil || *p1.Entries[1].Refusal != "limits.A:B: bad" || p1.NextBefore == nil || *p1.NextBefore != 2 {
		t.Fatalf("first page %+v", p1)
	}
	p2 := get("?limit=2&before=2")
	if len(p2.Entries) != 1 || p2.Entries[0].Kind != "load" || p2.Entries[0].Refusal != nil || p2.NextBefore != nil ||
		strings.Join(p2.Entries[0].Diff, "") != "A:B: absent -> 5/1s" {
		t.Fatalf("last page %+v", p2)
	}
	for _, bad := range []struct{ q, field string }{
		{"?limit=0", "limit"}, {"?limit=501", "limit"}, {"?limit=x", "limit"}, {"?before=-1", "before"},
		{"?page=2", "page"}, {"?limit=1&limit=2", "limit"},
	} {
		if a := s.Get(t, "/limits/history"+bad.q, "tok"); a.Status != 400 || !strings.Contains(a.Body, `"field":"`+bad.field+`"`) {
			t.Errorf("%s: status %d: %s; want 400 naming %s", bad.q, a.Status, a.Body, bad.field)
		}
	}
	if a := s.Get(t, "/limits/history", ""); a.Status != 401 {
		t.Errorf("without the token: status %d, want 401", a.Status)
	}
}
