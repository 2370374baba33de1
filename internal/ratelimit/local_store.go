package ratelimit

import (
	"context"
	"time"
)

// LocalStore is the in-process Store: the Model behind a mutex, with a
// clock, the time since the store's start (lockedModel). The limiter's
// fallback for when Redis fails keeps its windows in one (fallback).
type LocalStore struct {
	lockedModel
}

// NewLocalStore returns an empty LocalStore reading time from now (time.Now
// when nil).
func NewLocalStore(now func() time.Time) *LocalStore {
	s := &LocalStore{}
	s.init(now, true)
	return s
}

// Check implements Store with Model.Check. StoreResult.At is on the wall
// clock: the store's clock (now) when the check read it, in whole
// microseconds; for a member already held, the time a sliding window
// recorded it at (for the fallback's copy of a Redis admission,
// followRedis's time). Under concurrent checks a sliding window may record
// a member a few microseconds after At, never before: it keeps its entries
// in time order.
func (s *LocalStore) Check(_ context.Context, windows []KeyWindow, member string, amount int64) (StoreResult, error) {
	now := s.clock()
	s.mu.Lock()
	res := s.model.Check(windows, member, amount, now)
	s.mu.Unlock()
	s.wallAt(&res)
	return res, nil
}

// wallAt turns res.At from the store's clock to the wall clock.
func (s *LocalStore) wallAt(res *StoreResult) {
	if !res.At.IsZero() {
		res.At = time.UnixMicro(micros(s.wall(res.At)))
	}
	if !res.Now.IsZero() {
		res.Now = time.UnixMicro(micros(s.wall(res.Now)))
	}
}

// Release implements Store: it removes member from every window given. It
// always answers.
func (s *LocalStore) Release(_ context.Context, windows []KeyWindow, member string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.model.Release(windows, member), nil
}

// ReleaseIfAmount implements Store: it removes member from each window
// given that holds it for amount (an admission's own record, never
// another's of the same member for another amount). It always answers.
func (s *LocalStore) ReleaseIfAmount(_ context.Context, windows []KeyWindow, member string, amount int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.model.ReleaseIfAmount(windows, member, amount), nil
}

// Ping implements Store; a LocalStore always answers.
func (s *LocalStore) Ping(context.Context) error { return nil }

// Throttle implements Learner on the store's clock (Model.Throttle).
func (s *LocalStore) Throttle(_ context.Context, windows []KeyWindow, retryAfter time.Duration) error {
	now := s.clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.model.Throttle(windows, now, retryAfter)
	return nil
}

// ResetLearned implements Learner.
func (s *LocalStore) ResetLearned(_ context.Context, windows []KeyWindow) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.model.ResetLearned(windows)
	return nil
}
