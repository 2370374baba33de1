package configcenter

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// missingTableHistory fails every Record while missing is set, like a
// database whose schema is behind (no limit_config_history table yet).
type missingTableHistory struct {
	recordingHistory
	mu      sync.Mutex
	missing bool
}

func (h *missingTableHistory) Record(ctx context.Context, c Change) error {
	h.mu.Lock()
	missing := h.missing
	h.mu.Unlock()
	if missing {
		return errors.New("no such table: limit_config_history")
	}
	return h.recordingHistory.Record(ctx, c)
}

// TestManagerRecordsTheLoadOnceTheTableIsThere: the document loaded while
// the history table is missing is written to the history once it is there,
// before the next document's entry, so the audit trail starts with the
// document that was in force.
func TestManagerRecordsTheLoadOnceTheTableIsThere(t *testing.T) {
	ctx := context.Background()
	h := &missingTableHistory{missing: true}
	m, _ := NewManager(chanSource{}, &captureApplier{}, ManagerOptions{History: h})
	_ = m.Apply(ctx, Document{Source: "file", Name: "f", Content: []byte("limits:\n  A:B: 5\n")})
	if n := len(h.entries); n != 0 {
		t.Fatalf("%d entries recorded with the table missing", n)
	}
	h.setMissing(false) // payserver migrate ran
	_ = m.Apply(ctx, Document{Source: "file", Name: "f", Content: []byte("limits:\n  A:B: 6\n")})
	if len(h.entries) != 2 || h.entries[0].Kind != KindLoad || h.entries[1].Kind != KindChange {
		t.Fatalf("entries = %+v, want the load, then the change", h.entries)
	}
	// Without a next document, RetryHistory (run every historyRetryEvery
	// by Run) writes what is pending.
	h.setMissing(true)
	_ = m.Apply(ctx, Document{Source: "file", Name: "f", Content: []byte("limits:\n  A:B: 7\n")})
	h.setMissing(false)
	if err := m.RetryHistory(ctx); err != nil || len(h.entries) != 3 || h.entries[2].Keys[0] != "A:B: 6/1s -> 7/1s" {
		t.Errorf("RetryHistory = %v, entries %+v; want nil and the 6 -> 7 change third", err, h.entries)
	}
	if err := m.RetryHistory(ctx); err != nil || len(h.entries) != 3 {
		t.Errorf("RetryHistory with nothing pending = %v, %d entries; want nil and no new entry", err, len(h.entries))
	}
}

func (h *missingTableHistory) setMissing(missing bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.missing = missing
}
