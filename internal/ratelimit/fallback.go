package ratelimit

import (
	"context"
	"sync/atomic"
	"time"
)

// fallback is what the limiter decides with when Redis fails (policy
// "local"): a LocalStore's windows, each limit scaled to this instance's
// share, so that N instances together cannot admit more than the shared
// limit.
//
// It keeps more than a LocalStore, so that a Redis failover is not a fresh
// start in either direction:
//   - copies of this instance's own Redis admissions in sliding count
//     windows (followRedis), the newest limit × share of each window,
//     so that when Redis fails those windows start from what this instance
//     already admitted;
//   - for amount and calendar windows, whose admissions can be too many to
//     copy as weighted entries (a day's payments), the use Redis last
//     reported (followRedis): while it can still be in the window, the
//     in-process limit is the instance's share of what was left
//     (baseline); and each admission's identity, its member and amount,
//     for a while, so that a retry in process is a duplicate or a conflict
//     as on Redis (noteIdentity);
//   - the admissions decided in process (CheckLocalOnly), which Redis does
//     not hold, until they leave their windows (LocalOnly), so that back on
//     Redis the limiter can lower the limits it asks by them;
//   - the learned limits Redis last reported binding (noteLearned), so that
//     in an outage each window keeps its last learned limit, climbing as
//     the model climbs it from when it was seen (seenLearned); the limiter
//     cuts it to the instance's share as it cuts the configured limit.
type fallback struct {
	// LocalStore holds every admission: decided here, and copies of
	// Redis's. Its mutex guards the fields below too.
	*LocalStore

	// localOnlyUntil is the time (µs) until which some window may still hold
	// an admission decided in process: a lock-free "nothing to do".
	localOnlyUntil atomic.Int64

	localOnly *Model // the admissions decided here while Redis failed
	seen      map[windowID]redisUse
	// seenSweep says when seen is swept (sweepSeenIfGrown).
	seenSweep sweeper
	// ids are the identities of Redis admissions in amount and calendar
	// windows (noteIdentity), idOrder the order they were noted in.
	ids     map[identityKey]identity
	idOrder []identityEntry
	// learned holds the learned limits Redis last reported, each as a
	// state thrown at the time it was seen; nLearned is its size, read
	// without the lock.
	learned  map[windowID]learnedState
	nLearned atomic.Int32
}

// redisUse is a window's use as Redis last reported it, and until when (µs,
// on the store's clock) it may still be in the window.
type redisUse struct {
	use   int64
	until int64
	// period is the calendar period (µs, wall clock) it was read in.
	period int64
}

// newFallback returns an empty fallback reading time from now (time.Now
// when nil).
func newFallback(now func() time.Time) *fallback {
	s := &fallback{LocalStore: NewLocalStore(now), seen: map[windowID]redisUse{}, learned: map[windowID]learnedState{}, ids: map[identityKey]identity{}}
	s.localOnly = NewModel()
	s.localOnly.wall = s.wall
	return s
}

// CheckLocalOnly is Check for a decision the limiter takes in process while
// Redis fails: an admission is also remembered as one Redis does not hold,
// in each window that did not hold the member yet. localOnly reports, for
// an admission, whether the member's record here is an admission decided
// in process (this one, or an earlier one it duplicates) rather than a copy
// of a Redis admission (followRedis): the shared store never recorded it,
// so what the shared store holds of the member is another admission.
func (s *fallback) CheckLocalOnly(windows []KeyWindow, member string, amount int64, t time.Time) (res StoreResult, localOnly bool) {
	res, localOnly = s.checkLocalOnly(windows, member, amount, t)
	s.wallAt(&res)
	return res, localOnly
}

func (s *fallback) checkLocalOnly(windows []KeyWindow, member string, amount int64, t time.Time) (StoreResult, bool) {
	now := s.at(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recallIdentities(windows, member, now)
	held := make([]bool, len(windows))
	for i, w := range windows {
		held[i] = s.model.holds(w, member, now)
	}
	// A merchant's use holds what its window holds (Model.Check).
	for i, p := range MerchantParents(windows) {
		if p >= 0 && held[p] {
			held[i] = true
		}
	}
	res := s.model.Check(windows, member, amount, now)
	if !res.Allowed {
		return res, false
	}
	fresh := windows[:0:0]
	localOnly := false
	for i, w := range windows {
		if w.Track == TrackOther {
			continue
		}
		switch {
		case s.localOnly.holds(w, member, now):
			localOnly = true // an earlier in-process admission: this is its retry
		case !held[i]:
			w.Reserved, w.OwnReserve = nil, 0 // its indexes are of windows, not of fresh
			fresh = append(fresh, w)
		}
	}
	if len(fresh) > 0 {
		localOnly = true
		s.localOnly.Check(fresh, member, amount, now)
		for _, w := range fresh {
			s.localOnlyAt(micros(now) + w.stay(s.wall(now)))
		}
	}
	return res, localOnly
}

// localOnlyAt raises localOnlyUntil to until.
func (s *fallback) localOnlyAt(until int64) {
	for {
		old := s.localOnlyUntil.Load()
		if old >= until || s.localOnlyUntil.CompareAndSwap(old, until) {
			return
		}
	}
}

// mayHoldLocalOnly reports, without a lock, whether some window may still
// hold an admission decided in process at t.
func (s *fallback) mayHoldLocalOnly(t time.Time) bool {
	return s.localOnlyUntil.Load() > micros(s.at(t))
}

// followRedis keeps what a Redis answer at t tells for a later outage, under
// one lock: when Redis admitted member, a copy of it in every sliding count
// window whose limit scaled by share is at least 1, keeping only the newest
// scaled-limit entries of each (enough to know whether this instance's own
// admissions fill its share, and a bound on memory; a window that holds the
// member already does not get it twice); and, for each amount or calendar
// window, the use Redis reported (uses, in the order of windows).
func (s *fallback) followRedis(windows []KeyWindow, share float64, member string, amount int64, admitted bool, uses []int64, t time.Time) {
	at := micros(s.at(t))
	s.mu.Lock()
	defer s.mu.Unlock()
	// Redis's answers reach here for every merchant a request names: the
	// copies must leave as their members do.
	s.model.sweepIfGrown(at)
	s.sweepSeenIfGrown(at)
	for i, w := range windows {
		if w.Track == TrackOther {
			continue // never recorded: another bizType's use
		}
		if w.Amount || w.IsCalendar() {
			if i < len(uses) {
				s.noteUse(w, uses[i], at)
			}
			if admitted {
				s.noteIdentity(w, member, amount, at)
			}
			continue
		}
		limit := scaleLimit(w.Limit, share)
		if !admitted || limit <= 0 {
			continue
		}
		q := s.model.slidingAt(w, at)
		if q.has(member) {
			continue
		}
		if over := int64(q.len()) - limit + 1; over > 0 {
			q.drop(int(over))
		}
		q.push(localEntry{member: member, at: at, weight: 1, amount: amount})
	}
}

// identityCap bounds the identities of Redis admissions kept for amount
// and calendar windows (noteIdentity), and identityTTL how long each is
// kept: an identity serves a retry of the same requestId during an outage
// (a client's retry after a lost answer, a concurrent duplicate), which
// comes within minutes; a later retry of a payment is answered from its
// order before the limiter.
const (
	identityCap = 1 << 16
	identityTTL = 15 * time.Minute
)

// identityKey names one member of one window.
type identityKey struct {
	window windowID
	member string
}

// identity is the amount a Redis admission recorded a member with, and
// until when (µs, the store's clock) it is kept.
type identity struct{ amount, until int64 }

// identityEntry is one noteIdentity, in the order they were made.
type identityEntry struct {
	key   identityKey
	until int64
}

// noteIdentity keeps that Redis admitted member for amount in the amount
// or calendar window w, for identityTTL or until it leaves the window,
// whichever is sooner, at most identityCap at once (the oldest go first).
// An in-process check of the member then finds it held (checkLocalOnly):
// the same amount again is a duplicate, another amount a conflict, as on
// Redis. s.mu must be held.
func (s *fallback) noteIdentity(w KeyWindow, member string, amount, at int64) {
	until := at + min(w.stay(s.wall(time.UnixMicro(at))), identityTTL.Microseconds())
	k := identityKey{window: idOf(w), member: member}
	s.ids[k] = identity{amount: amount, until: until}
	s.idOrder = append(s.idOrder, identityEntry{key: k, until: until})
	for len(s.idOrder) > 0 && (len(s.idOrder) > identityCap || s.idOrder[0].until <= at) {
		e := s.idOrder[0]
		s.idOrder = s.idOrder[1:]
		if id, ok := s.ids[e.key]; ok && id.until == e.until {
			delete(s.ids, e.key)
		}
	}
	if cap(s.idOrder) > 2*identityCap && len(s.idOrder) < cap(s.idOrder)/4 {
		s.idOrder = append([]identityEntry(nil), s.idOrder...)
	}
}

// recallIdentities puts into the in-process windows, with no weight, the
// identity of member in each window that does not hold it but where Redis
// admitted it (noteIdentity): the use Redis reported is their baseline, so
// the member counts nothing more, but Model.Check then sees it held.
// s.mu must be held.
func (s *fallback) recallIdentities(windows []KeyWindow, member string, now time.Time) {
	if len(s.ids) == 0 {
		return
	}
	for _, w := range windows {
		if w.Track == TrackOther || !(w.Amount || w.IsCalendar()) {
			continue
		}
		id, ok := s.ids[identityKey{window: idOf(w), member: member}]
		if !ok || id.until <= micros(now) || s.model.holds(w, member, now) {
			continue
		}
		s.model.addIdentity(w, member, id.amount, now)
	}
}

// noteUse remembers use, reported by Redis at at (the store's clock), of an
// amount or calendar window, with until when it can still be in the window.
// s.mu must be held.
func (s *fallback) noteUse(w KeyWindow, use, at int64) {
	u := redisUse{use: use, until: at + w.Size.Microseconds()}
	if w.IsCalendar() {
		wall := s.wall(time.UnixMicro(at))
		start, end := w.Calendar.Period(wall)
		u.period, u.until = micros(start), at+end.Sub(wall).Microseconds()
	}
	s.seen[idOf(w)] = u
}

// sweepSeenIfGrown forgets the uses Redis reported that have left their
// windows more than sweepSlack before at (µs), when seen is due
// (sweeper).
func (s *fallback) sweepSeenIfGrown(at int64) {
	n := len(s.seen)
	if !s.seenSweep.due(n, at) {
		return
	}
	for id, u := range s.seen {
		if u.until <= at-sweepSlack.Microseconds() {
			delete(s.seen, id)
		}
	}
	if s.seenSweep.swept(n, len(s.seen), at) {
		s.seen = rebuilt(s.seen)
	}
}

// baseline returns, for each window, the use Redis last reported that may
// still be in it at t (0 for sliding count windows, whose admissions are
// copied instead, and for a use that has left).
func (s *fallback) baseline(windows []KeyWindow, t time.Time) []int64 {
	at := micros(s.at(t))
	out := make([]int64, len(windows))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, w := range windows {
		u, ok := s.seen[idOf(w)]
		if !ok || at >= u.until {
			continue
		}
		if w.IsCalendar() {
			if start, _ := w.Calendar.Period(s.wall(s.at(t))); micros(start) != u.period {
				continue
			}
		}
		out[i] = u.use
	}
	return out
}

// LocalOnly returns, for each window, the use by admissions decided in
// process that it still holds at t, and how long until it may take them no
// more: until the oldest of them leaves a sliding window, or until a
// calendar window's period ends.
func (s *fallback) LocalOnly(windows []KeyWindow, t time.Time) (uses []int64, waits []time.Duration) {
	now := s.at(t)
	at := micros(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	uses = s.localOnly.Usage(windows, now)
	waits = make([]time.Duration, len(windows))
	for i, w := range windows {
		if uses[i] == 0 {
			continue
		}
		if w.IsCalendar() {
			_, end := w.Calendar.Period(s.wall(now))
			waits[i] = end.Sub(s.wall(now))
			continue
		}
		oldest := s.localOnly.sliding[idOf(w)].get(0).at
		waits[i] = time.Duration(oldest+w.Size.Microseconds()-at) * time.Microsecond
	}
	return uses, waits
}

// retain forgets every window for which keep is false.
func (s *fallback) retain(keep func(id windowID) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.model.retain(keep)
	s.localOnly.retain(keep)
	for id := range s.seen {
		if !keep(id) {
			delete(s.seen, id)
		}
	}
	for k := range s.ids {
		if !keep(k.window) {
			delete(s.ids, k)
		}
	}
	for id := range s.learned {
		if !keep(id) {
			delete(s.learned, id)
		}
	}
	s.nLearned.Store(int32(len(s.learned)))
}

// noteLearned keeps what a Redis answer at t said of the learning windows'
// limits (StoreResult.Limits; nil when none was below its configured
// limit): each learned limit below the configured one is kept as a learned
// state set at t (value the effective limit then, 0 during a not-before),
// which climbs by the window's step per whole window from t, as the
// model's does from a throttle; a window Redis reports at its configured
// limit forgets it. Without learned limits reported or kept it costs one
// atomic load.
func (s *fallback) noteLearned(windows []KeyWindow, limits []int64, t time.Time) {
	if limits == nil && s.nLearned.Load() == 0 {
		return
	}
	at := micros(s.at(t))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, w := range windows {
		if !w.Learns() {
			continue
		}
		id := idOf(w)
		if limits == nil || limits[i] >= w.Limit {
			delete(s.learned, id)
			continue
		}
		l := limits[i]
		s.learned[id] = learnedState{l: l, t: at, e: at + (w.Limit-l+w.Learn.Step-1)/w.Learn.Step*w.Size.Microseconds()}
	}
	s.nLearned.Store(int32(len(s.learned)))
}

// seenLearned returns, for each window, the limit the learned limit Redis
// last reported gives it at t (its configured limit when none); nil when
// no window has one.
func (s *fallback) seenLearned(windows []KeyWindow, t time.Time) []int64 {
	if s.nLearned.Load() == 0 {
		return nil
	}
	at := micros(s.at(t))
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for i, w := range windows {
		st, ok := s.learned[idOf(w)]
		if !ok || !w.Learns() {
			continue
		}
		if out == nil {
			out = make([]int64, len(windows))
			for j, o := range windows {
				out[j] = o.Limit
			}
		}
		out[i], _, _ = effective(w, st, true, at)
	}
	return out
}

// forgetLearned drops the learned limits seen from Redis of the windows
// given.
func (s *fallback) forgetLearned(windows []KeyWindow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range windows {
		delete(s.learned, idOf(w))
	}
	s.nLearned.Store(int32(len(s.learned)))
}

// Release implements Store: it removes member from every window given, the
// admissions decided in process included. It always answers.
func (s *fallback) Release(_ context.Context, windows []KeyWindow, member string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := s.model.Release(windows, member)
	if s.localOnly.Release(windows, member) {
		found = true
	}
	return found, nil
}

// ReleaseIfAmount implements Store: it removes member from each window
// given that holds it for amount (an admission's own record, never
// another's of the same member for another amount), the admissions decided
// in process included. It always answers.
func (s *fallback) ReleaseIfAmount(_ context.Context, windows []KeyWindow, member string, amount int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := s.model.ReleaseIfAmount(windows, member, amount)
	if s.localOnly.ReleaseIfAmount(windows, member, amount) {
		found = true
	}
	return found, nil
}
