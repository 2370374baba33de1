package stats

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
)

type memRouteStore struct {
	fail error
	rows []RouteRow
}

func (m *memRouteStore) AddRoutes(_ context.Context, rows []RouteRow) error {
	if m.fail != nil {
		return m.fail
	}
	m.rows = append(m.rows, rows...)
	return nil
}

func (m *memRouteStore) Routes(context.Context, time.Time, time.Time, string) ([]RouteRow, error) {
	return m.rows, nil
}

// TestRouteCounterKeepsCountsUntilWritten: counts are summed per minute and
// event, a failed flush keeps them, and the next one writes them once.
func TestRouteCounterKeepsCountsUntilWritten(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)
	store := &memRouteStore{fail: errors.New("database down")}
	c, err := NewRouteCounter(store, func() time.Time { return now }, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Count("P", "", "B", "")
	c.Count("P", "A", "B", "limited")
	c.Count("P", "A", "B", "limited")
	if err := c.Flush(context.Background()); err == nil {
		t.Fatal("flush to a failing store succeeded")
	}
	store.fail = nil
	c.Count("P", "", "B", "")
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	m := now.Truncate(time.Minute)
	want := []RouteRow{
		{Minute: m, BizType: "P", From: "", To: "B", Count: 2},
		{Minute: m, BizType: "P", From: "A", To: "B", Reason: "limited", Count: 2},
	}
	if !reflect.DeepEqual(store.rows, want) {
		t.Fatalf("written %+v, want %+v", store.rows, want)
	}
	if err := c.Flush(context.Background()); err != nil || len(store.rows) != 2 {
		t.Fatalf("an empty flush wrote %d rows (%v)", len(store.rows)-2, err)
	}
}

// TestRouteCounterLogsWhatItDrops: past the cap on pending rows (the
// database failing for long), new events are dropped, and the next flush
// says how many at error level, once.
func TestRouteCounterLogsWhatItDrops(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)
	store := &memRouteStore{fail: errors.New("database down")}
	var logs bytes.Buffer
	c, err := NewRouteCounter(store, func() time.Time { return now }, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c.maxPending = 2
	c.Count("P", "", "A", "")
	c.Count("P", "", "B", "")
	c.Count("P", "", "B", "") // an existing row still counts
	c.Count("P", "", "C", "") // a third row is dropped
	c.Count("P", "", "D", "") // and a fourth
	_ = c.Flush(context.Background())
	if !strings.Contains(logs.String(), "route stats dropped") || !strings.Contains(logs.String(), "events=2") {
		t.Fatalf("log after dropping 2 events:\n%s", logs.String())
	}
	logs.Reset()
	store.fail = nil
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "dropped") {
		t.Errorf("the drop was logged again:\n%s", logs.String())
	}
	var n int64
	for _, r := range store.rows {
		n += r.Count
	}
	if len(store.rows) != 2 || n != 3 {
		t.Errorf("written %+v, want rows A (1) and B (2)", store.rows)
	}
}
