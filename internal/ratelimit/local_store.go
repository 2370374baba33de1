package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// LocalStore is the in-process Store: the Model behind a mutex, with a
// clock. The limiter falls back to it when Redis fails (policy "local"),
// with each limit scaled to this instance's share, so that N instances
// together cannot admit more than the shared limit.
//
// For the limiter it keeps two more things, so that a Redis failover is not
// a fresh start in either direction:
//   - copies of this instance's own Redis admissions (CopyRedisAdmission),
//     the newest limit × share of each window, so that when Redis fails the
//     in-process windows start from what this instance already admitted;
//   - the admissions decided in process (CheckLocalOnly), which Redis does
//     not hold, until they leave their windows (LocalOnly), so that back on
//     Redis the limiter can lower the limits it asks by them.
type LocalStore struct {
	now  func() time.Time
	base time.Time // the store's clock is the time since base (monotonic with time.Now)

	// localOnlyUntil is the time (µs) until which some window may still hold
	// an admission decided in process: a lock-free "nothing to do".
	localOnlyUntil atomic.Int64

	mu        sync.Mutex
	windows   *Model // every admission: decided here, and copies of Redis's
	localOnly *Model // the admissions decided here while Redis failed
}

// NewLocalStore returns an empty LocalStore reading time from now (time.Now
// when nil).
func NewLocalStore(now func() time.Time) *LocalStore {
	if now == nil {
		now = time.Now
	}
	return &LocalStore{now: now, base: now(), windows: NewModel(), localOnly: NewModel()}
}

// at is t on the store's clock: the time since base, so that wall-clock
// jumps do not move windows (with time.Now's monotonic reading).
func (s *LocalStore) at(t time.Time) time.Time { return time.UnixMicro(0).Add(t.Sub(s.base)) }

// Check implements Store with Model.Check.
func (s *LocalStore) Check(_ context.Context, k Key, windows []Window, member string) (StoreResult, error) {
	now := s.at(s.now())
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.windows.Check(k, windows, member, now), nil
}

// CheckLocalOnly is Check for a decision the limiter takes in process while
// Redis fails: an admission is also remembered as one Redis does not hold,
// in each window that did not hold the member yet.
func (s *LocalStore) CheckLocalOnly(k Key, windows []Window, member string, t time.Time) StoreResult {
	now := s.at(t)
	at := micros(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	held := make([]bool, len(windows))
	for i, w := range windows {
		held[i] = s.windows.window(k, w.Size, at).has(member)
	}
	res := s.windows.Check(k, windows, member, now)
	if !res.Allowed {
		return res
	}
	for i, w := range windows {
		if held[i] {
			continue
		}
		if q := s.localOnly.window(k, w.Size, at); !q.has(member) {
			q.push(localEntry{member: member, at: at})
			s.localOnlyAt(at + w.Size.Microseconds())
		}
	}
	return res
}

// localOnlyAt raises localOnlyUntil to until.
func (s *LocalStore) localOnlyAt(until int64) {
	for {
		old := s.localOnlyUntil.Load()
		if old >= until || s.localOnlyUntil.CompareAndSwap(old, until) {
			return
		}
	}
}

// MayHoldLocalOnly reports, without a lock, whether some window may still
// hold an admission decided in process at t.
func (s *LocalStore) MayHoldLocalOnly(t time.Time) bool {
	return s.localOnlyUntil.Load() > micros(s.at(t))
}

// CopyRedisAdmission records member, admitted by Redis at t, in every window
// whose limit scaled by share is at least 1, and keeps only the newest
// scaled-limit entries of each: enough to know whether this instance's own
// admissions fill its share, and a bound on memory. A window that holds the
// member already does not get it twice.
func (s *LocalStore) CopyRedisAdmission(k Key, windows []Window, share float64, member string, t time.Time) {
	at := micros(s.at(t))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range windows {
		limit := scaleLimit(w.Limit, share)
		if limit <= 0 {
			continue
		}
		q := s.windows.window(k, w.Size, at)
		if q.has(member) {
			continue
		}
		if over := int64(q.len()) - limit + 1; over > 0 {
			q.drop(int(over))
		}
		q.push(localEntry{member: member, at: at})
	}
}

// LocalOnly returns, for each window of k, how many admissions decided in
// process it still holds at t, and how long until the oldest of them leaves.
func (s *LocalStore) LocalOnly(k Key, windows []Window, t time.Time) (counts []int64, waits []time.Duration) {
	now := s.at(t)
	at := micros(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	counts = s.localOnly.Usage(k, windows, now)
	waits = make([]time.Duration, len(windows))
	for i, w := range windows {
		if counts[i] > 0 {
			oldest := s.localOnly.windows[windowID{k, w.Size}].get(0).at
			waits[i] = time.Duration(oldest+w.Size.Microseconds()-at) * time.Microsecond
		}
	}
	return counts, waits
}

// Retain forgets every window for which keep is false.
func (s *LocalStore) Retain(keep func(k Key, size time.Duration) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windows.Retain(keep)
	s.localOnly.Retain(keep)
}

// Release implements Store: it removes member from every window of k, the
// admissions decided in process included.
func (s *LocalStore) Release(_ context.Context, k Key, windows []Window, member string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windows.Release(k, windows, member)
	s.localOnly.Release(k, windows, member)
	return nil
}

// Usage implements Store.
func (s *LocalStore) Usage(_ context.Context, k Key, windows []Window) ([]int64, error) {
	now := s.at(s.now())
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.windows.Usage(k, windows, now), nil
}

// Ping implements Store; a LocalStore always answers.
func (s *LocalStore) Ping(context.Context) error { return nil }
