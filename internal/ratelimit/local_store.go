package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// LocalStore is an in-process Store with the same semantics as the Redis
// script: exact sliding windows whose members are requestIds. The limiter
// falls back to it when Redis fails (policy "local"), with each limit scaled
// to this instance's share, so that N instances together cannot admit more
// than the shared limit.
//
// For the limiter it also keeps, while Redis answers, a mirror of this
// instance's own Redis admissions (mirror), so that a failover starts from
// what this instance already admitted in each window rather than from zero;
// and, after a failover, which admissions were decided in process
// (unshared), which Redis does not hold.
type LocalStore struct {
	now  func() time.Time
	base time.Time // entries are stamped with the time since base

	// unsharedUntil is the stamp until which some window may still hold an
	// unshared admission: a lock-free "nothing to do" for the limiter.
	unsharedUntil atomic.Int64

	mu   sync.Mutex
	keys map[Key]*localKey
}

// localKey holds the windows of one key, one per size (few).
type localKey struct {
	sets []*localSet
}

// localSet is one window of one key.
type localSet struct {
	size time.Duration
	// entries are the window's admissions in time order: decided here, and
	// for the limiter also mirrored from Redis (at most limit × share).
	entries queue
	// unshared are the admissions the limiter decided here while Redis
	// failed (check with unshared), dropped only when they leave the window.
	unshared queue
}

type localEntry struct {
	member string
	at     int64 // nanoseconds since LocalStore.base
}

// queue is a time-ordered list of entries in a ring buffer (a power of two
// long, grown by doubling), so that a queue that keeps about the same length
// moves and allocates nothing.
type queue struct {
	buf  []localEntry
	head int // index in buf of the oldest entry
	n    int
	// idx counts the entries of each member, so that has and remove do not
	// walk the queue: mirrored windows hold up to limit × share entries.
	idx map[string]int32
}

// NewLocalStore returns an empty LocalStore reading time from now (time.Now
// when nil).
func NewLocalStore(now func() time.Time) *LocalStore {
	if now == nil {
		now = time.Now
	}
	return &LocalStore{now: now, base: now(), keys: map[Key]*localKey{}}
}

// stamp is t as an entry time. With time.Now it is monotonic.
func (s *LocalStore) stamp(t time.Time) int64 { return int64(t.Sub(s.base)) }

func (q *queue) len() int { return q.n }

// get returns the i-th oldest entry.
func (q *queue) get(i int) localEntry { return q.buf[(q.head+i)&(len(q.buf)-1)] }

// unindex forgets one entry of member in idx.
func (q *queue) unindex(member string) {
	if c := q.idx[member]; c > 1 {
		q.idx[member] = c - 1
	} else {
		delete(q.idx, member)
	}
}

// drop forgets the k oldest entries.
func (q *queue) drop(k int) {
	for i := 0; i < k; i++ {
		j := (q.head + i) & (len(q.buf) - 1)
		q.unindex(q.buf[j].member)
		q.buf[j] = localEntry{}
	}
	q.head = (q.head + k) & (len(q.buf) - 1)
	q.n -= k
}

// trim forgets the entries at or before cutoff.
func (q *queue) trim(cutoff int64) {
	k := 0
	for k < q.n && q.get(k).at <= cutoff {
		k++
	}
	if k > 0 {
		q.drop(k)
	}
}

// push appends e, never before the newest entry (callers read the clock
// before taking the lock, so two of them can arrive out of order by a few
// microseconds; the later stamp is the safe one).
func (q *queue) push(e localEntry) {
	if q.n > 0 {
		if last := q.get(q.n - 1); last.at > e.at {
			e.at = last.at
		}
	}
	if q.n == len(q.buf) {
		buf := make([]localEntry, max(8, 2*len(q.buf)))
		for i := 0; i < q.n; i++ {
			buf[i] = q.get(i)
		}
		q.buf, q.head = buf, 0
	}
	q.buf[(q.head+q.n)&(len(q.buf)-1)] = e
	q.n++
	if q.idx == nil {
		q.idx = map[string]int32{}
	}
	q.idx[e.member]++
}

func (q *queue) has(member string) bool { return q.idx[member] > 0 }

// remove deletes every entry of member.
func (q *queue) remove(member string) {
	if q.idx[member] == 0 {
		return
	}
	delete(q.idx, member)
	kept := 0
	for i := 0; i < q.n; i++ {
		if e := q.get(i); e.member != member {
			q.buf[(q.head+kept)&(len(q.buf)-1)] = e
			kept++
		}
	}
	for i := kept; i < q.n; i++ {
		q.buf[(q.head+i)&(len(q.buf)-1)] = localEntry{}
	}
	q.n = kept
}

func (s *localSet) trim(cutoff int64) {
	s.entries.trim(cutoff)
	s.unshared.trim(cutoff)
}

// key returns k's windows, creating them. s.mu is held.
func (s *LocalStore) key(k Key) *localKey {
	lk := s.keys[k]
	if lk == nil {
		lk = &localKey{}
		s.keys[k] = lk
	}
	return lk
}

// set returns the window of size, creating it.
func (lk *localKey) set(size time.Duration) *localSet {
	if set := lk.find(size); set != nil {
		return set
	}
	set := &localSet{size: size}
	lk.sets = append(lk.sets, set)
	return set
}

// find returns the window of size, or nil.
func (lk *localKey) find(size time.Duration) *localSet {
	if lk == nil {
		return nil
	}
	for _, set := range lk.sets {
		if set.size == size {
			return set
		}
	}
	return nil
}

// Check implements Store.
func (s *LocalStore) Check(_ context.Context, k Key, windows []Window, member string) (StoreResult, error) {
	return s.check(k, windows, member, s.now(), false), nil
}

// check decides member against every window of k at now, and records it in
// each if admitted; with unshared, the admission is also remembered as one
// Redis does not hold.
func (s *LocalStore) check(k Key, windows []Window, member string, now time.Time, unshared bool) StoreResult {
	if len(windows) == 0 {
		return StoreResult{Allowed: true}
	}
	at := s.stamp(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	lk := s.key(k)
	refused := StoreResult{Window: -1}
	for i, w := range windows {
		set := lk.set(w.Size)
		set.trim(at - int64(w.Size))
		c := int64(set.entries.len())
		if c < w.Limit {
			continue
		}
		if set.entries.has(member) {
			return StoreResult{Allowed: true, Count: c, Window: i, Duplicate: true}
		}
		wait := w.Size // limit 0: nothing will ever leave
		if w.Limit > 0 {
			wait = time.Duration(set.entries.get(int(c-w.Limit)).at + int64(w.Size) - at)
		}
		if refused.Window < 0 || wait > refused.RetryAfter {
			refused = StoreResult{Count: c, Window: i, RetryAfter: wait}
		}
	}
	if refused.Window >= 0 {
		return refused
	}
	res := StoreResult{Allowed: true, Window: -1}
	room := int64(-1)
	for i, w := range windows {
		set := lk.set(w.Size)
		if set.entries.has(member) {
			res.Duplicate = true
		} else {
			e := localEntry{member: member, at: at}
			set.entries.push(e)
			if unshared {
				set.unshared.push(e)
				s.unsharedAt(at + int64(w.Size))
			}
		}
		c := int64(set.entries.len())
		if left := w.Limit - c; room < 0 || left < room {
			room, res.Window, res.Count = left, i, c
		}
	}
	return res
}

// unsharedAt raises unsharedUntil to until.
func (s *LocalStore) unsharedAt(until int64) {
	for {
		old := s.unsharedUntil.Load()
		if old >= until || s.unsharedUntil.CompareAndSwap(old, until) {
			return
		}
	}
}

// mayHaveUnshared reports, without a lock, whether some window may still
// hold an unshared admission at now.
func (s *LocalStore) mayHaveUnshared(now time.Time) bool {
	return s.unsharedUntil.Load() > s.stamp(now)
}

// mirror records member, admitted by Redis at now, in every window of k
// whose limit scaled by share is at least 1, and keeps only the newest
// scaled-limit entries of each: enough to know whether this instance's own
// admissions fill its share, and a bound on memory. A window that already
// holds member (dup: Redis said it was a duplicate) does not get it twice.
func (s *LocalStore) mirror(k Key, windows []Window, share float64, member string, now time.Time, dup bool) {
	at := s.stamp(now)
	s.mu.Lock()
	lk := s.key(k)
	for _, w := range windows {
		limit := scaleLimit(w.Limit, share)
		if limit <= 0 {
			continue
		}
		set := lk.set(w.Size)
		set.trim(at - int64(w.Size))
		if dup && set.entries.has(member) {
			continue
		}
		if over := int64(set.entries.len()) - limit + 1; over > 0 {
			set.entries.drop(int(over))
		}
		set.entries.push(localEntry{member: member, at: at})
	}
	s.mu.Unlock()
}

// unshared returns, for each window of k, how many admissions decided in
// process it still holds at now, and how long until the oldest of them
// leaves.
func (s *LocalStore) unshared(k Key, windows []Window, now time.Time) (counts []int64, waits []time.Duration) {
	at := s.stamp(now)
	counts = make([]int64, len(windows))
	waits = make([]time.Duration, len(windows))
	s.mu.Lock()
	defer s.mu.Unlock()
	lk := s.keys[k]
	for i, w := range windows {
		set := lk.find(w.Size)
		if set == nil {
			continue
		}
		set.trim(at - int64(w.Size))
		if n := set.unshared.len(); n > 0 {
			counts[i] = int64(n)
			waits[i] = time.Duration(set.unshared.get(0).at + int64(w.Size) - at)
		}
	}
	return counts, waits
}

// retain forgets every window for which keep is false.
func (s *LocalStore) retain(keep func(k Key, size time.Duration) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, lk := range s.keys {
		sets := lk.sets[:0]
		for _, set := range lk.sets {
			if keep(k, set.size) {
				sets = append(sets, set)
			}
		}
		clear(lk.sets[len(sets):])
		lk.sets = sets
		if len(sets) == 0 {
			delete(s.keys, k)
		}
	}
}

// Release implements Store: it removes member from every window of k, the
// admissions decided in process included.
func (s *LocalStore) Release(_ context.Context, k Key, windows []Window, member string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	lk := s.keys[k]
	for _, w := range windows {
		if set := lk.find(w.Size); set != nil {
			set.entries.remove(member)
			set.unshared.remove(member)
		}
	}
	return nil
}

// Usage implements Store.
func (s *LocalStore) Usage(_ context.Context, k Key, windows []Window) ([]int64, error) {
	at := s.stamp(s.now())
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int64, len(windows))
	lk := s.keys[k]
	for i, w := range windows {
		if set := lk.find(w.Size); set != nil {
			set.trim(at - int64(w.Size))
			out[i] = int64(set.entries.len())
		}
	}
	return out, nil
}

// Ping implements Store; a LocalStore always answers.
func (s *LocalStore) Ping(context.Context) error { return nil }
