package configcenter

import (
	"context"
	"sync"
	"time"

	"payserver/internal/retry"
)

// historyRetryEvery is how often Run retries history entries the store
// refused (a database down, or its schema behind: no history table until
// `payserver migrate` runs).
const historyRetryEvery = 5 * time.Second

// maxPendingHistory bounds the entries kept for a later write; beyond it
// the oldest is dropped, and the drop logged.
const maxPendingHistory = 64

// pendingHistory is the entries not yet written to History, oldest first.
// Its lock also orders the writes, so that entries reach the store in the
// order they were made.
type pendingHistory struct {
	mu      sync.Mutex
	entries []Change
}

// record writes c to History after every entry still pending, or keeps
// them all for RetryHistory when the store fails.
func (m *Manager) record(ctx context.Context, c Change) {
	m.pending.mu.Lock()
	defer m.pending.mu.Unlock()
	m.pending.entries = append(m.pending.entries, c)
	if n := len(m.pending.entries) - maxPendingHistory; n > 0 {
		m.log.Warn("limits history entries dropped: the history store failed for too long", "dropped", n,
			"kind", m.pending.entries[0].Kind, "md5", m.pending.entries[0].MD5, "at", m.pending.entries[0].At)
		m.pending.entries = m.pending.entries[n:]
	}
	if err := m.flushLocked(ctx); err != nil {
		m.log.Warn("could not store the limits document in history; retrying", "kind", c.Kind, "md5", c.MD5,
			"pending", len(m.pending.entries), "retryEvery", historyRetryEvery, "err", err)
	}
}

// RetryHistory writes the history entries the store refused before, oldest
// first, and returns the store's error when one still fails (it stays
// pending). Run calls it every historyRetryEvery.
func (m *Manager) RetryHistory(ctx context.Context) error {
	m.pending.mu.Lock()
	defer m.pending.mu.Unlock()
	n := len(m.pending.entries)
	if n == 0 {
		return nil
	}
	if err := m.flushLocked(ctx); err != nil {
		return err
	}
	m.log.Info("stored the limits history entries the store had refused", "entries", n)
	return nil
}

func (m *Manager) flushLocked(ctx context.Context) error {
	for len(m.pending.entries) > 0 {
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := m.opts.History.Record(hctx, m.pending.entries[0])
		cancel()
		if err != nil {
			return err
		}
		m.pending.entries = m.pending.entries[1:]
	}
	return nil
}

// retryHistory runs RetryHistory every historyRetryEvery until ctx ends.
func (m *Manager) retryHistory(ctx context.Context) {
	retry.Every(ctx, historyRetryEvery, 0, func(ctx context.Context) { _ = m.RetryHistory(ctx) })
}
