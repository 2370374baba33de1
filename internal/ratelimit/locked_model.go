package ratelimit

import (
	"context"
	"sync"
	"time"
)

// lockedModel is what the in-process stores (LocalStore, DurableStore)
// share: the Model behind a mutex, with the store's clock. It implements
// the Store and Learner methods that only read (Usage, Learned) and
// WindowKey; each store writes its own changes (DurableStore journals
// them).
//
// The clock is one of two. With sinceBase (LocalStore) it is the time
// since base, the store's start, so that wall-clock jumps do not move
// windows (with time.Now's monotonic reading); calendar periods are dates,
// found from the wall clock at base plus that time (wall, which the Model
// is given). Without (DurableStore) it is the wall clock, as Redis TIME
// is, and wall is the identity. Either is whole microseconds, the model's
// unit.
type lockedModel struct {
	now       func() time.Time
	base      time.Time
	sinceBase bool

	mu    sync.Mutex
	model *Model
}

// init makes m an empty model reading time from now (time.Now when nil),
// on the clock since now's time if sinceBase, else on the wall clock.
func (m *lockedModel) init(now func() time.Time, sinceBase bool) {
	if now == nil {
		now = time.Now
	}
	m.now, m.model = now, NewModel()
	if sinceBase {
		m.base, m.sinceBase = now(), true
		m.model.wall = m.wall
	}
}

// at is t on the store's clock.
//
// It is whole microseconds, the model's unit: with the nanoseconds of the
// base left in, a calendar period's start, found from wall and at, came out
// a microsecond apart between calls, and the window started afresh.
func (m *lockedModel) at(t time.Time) time.Time {
	if !m.sinceBase {
		return time.UnixMicro(t.UnixMicro())
	}
	return time.UnixMicro(t.Sub(m.base).Microseconds())
}

// wall turns a time on the store's clock back into wall-clock time.
func (m *lockedModel) wall(t time.Time) time.Time {
	if !m.sinceBase {
		return t
	}
	return m.base.Add(t.Sub(time.UnixMicro(0)))
}

// clock is the time now on the store's clock.
func (m *lockedModel) clock() time.Time { return m.at(m.now()) }

// WindowKey implements WindowKeyer: WindowKey(w).
func (m *lockedModel) WindowKey(w KeyWindow) string { return WindowKey(w) }

// Usage implements Store.
func (m *lockedModel) Usage(_ context.Context, windows []KeyWindow) ([]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.model.Usage(windows, m.clock()), nil
}

// Learned implements Learner; its times are on the wall clock.
func (m *lockedModel) Learned(_ context.Context, windows []KeyWindow) ([]LearnedLimit, error) {
	m.mu.Lock()
	out := m.model.Learned(windows, m.clock())
	m.mu.Unlock()
	for i := range out {
		out[i].Since, out[i].Until = m.wall(out[i].Since), m.wall(out[i].Until)
		if !out[i].NotBefore.IsZero() {
			out[i].NotBefore = m.wall(out[i].NotBefore)
		}
	}
	return out, nil
}
