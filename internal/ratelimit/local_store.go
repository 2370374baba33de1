package ratelimit

import (
	"context"
	"sync"
	"time"
)

// LocalStore is an in-process Store with the same semantics as the Redis
// script: exact sliding windows whose members are requestIds. The limiter
// falls back to it when Redis fails (policy "local"), with each limit scaled
// to this instance's share, so that N instances together cannot admit more
// than the shared limit.
type LocalStore struct {
	now func() time.Time

	mu   sync.Mutex
	sets map[localKey]*localSet
}

type localKey struct {
	key  Key
	size time.Duration
}

type localEntry struct {
	member string
	at     time.Time
}

// localSet is one window's admissions in time order; head skips trimmed ones.
type localSet struct {
	entries []localEntry
	head    int
}

// NewLocalStore returns an empty LocalStore reading time from now (time.Now
// when nil).
func NewLocalStore(now func() time.Time) *LocalStore {
	if now == nil {
		now = time.Now
	}
	return &LocalStore{now: now, sets: map[localKey]*localSet{}}
}

func (s *localSet) trim(cutoff time.Time) {
	for s.head < len(s.entries) && !s.entries[s.head].at.After(cutoff) {
		s.entries[s.head] = localEntry{}
		s.head++
	}
	if s.head > 0 && s.head >= len(s.entries)/2 {
		n := copy(s.entries, s.entries[s.head:])
		s.entries = s.entries[:n]
		s.head = 0
	}
}

func (s *localSet) live() []localEntry { return s.entries[s.head:] }

func (s *localSet) has(member string) bool {
	for _, e := range s.live() {
		if e.member == member {
			return true
		}
	}
	return false
}

func (s *LocalStore) set(k Key, size time.Duration) *localSet {
	lk := localKey{k, size}
	set := s.sets[lk]
	if set == nil {
		set = &localSet{}
		s.sets[lk] = set
	}
	return set
}

// Check implements Store.
func (s *LocalStore) Check(_ context.Context, k Key, windows []Window, member string) (StoreResult, error) {
	if len(windows) == 0 {
		return StoreResult{Allowed: true}, nil
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	sets := make([]*localSet, len(windows))
	refused := StoreResult{Window: -1}
	for i, w := range windows {
		set := s.set(k, w.Size)
		set.trim(now.Add(-w.Size))
		sets[i] = set
		live := set.live()
		c := int64(len(live))
		if c < w.Limit {
			continue
		}
		if set.has(member) {
			return StoreResult{Allowed: true, Count: c, Window: i, Duplicate: true}, nil
		}
		var wait time.Duration = w.Size // limit 0: nothing will ever leave
		if w.Limit > 0 {
			wait = live[c-w.Limit].at.Add(w.Size).Sub(now)
		}
		if refused.Window < 0 || wait > refused.RetryAfter {
			refused = StoreResult{Count: c, Window: i, RetryAfter: wait}
		}
	}
	if refused.Window >= 0 {
		return refused, nil
	}
	res := StoreResult{Allowed: true, Window: -1}
	room := int64(-1)
	for i, w := range windows {
		set := sets[i]
		if set.has(member) {
			res.Duplicate = true
		} else {
			set.entries = append(set.entries, localEntry{member: member, at: now})
		}
		c := int64(len(set.live()))
		if left := w.Limit - c; room < 0 || left < room {
			room, res.Window, res.Count = left, i, c
		}
	}
	return res, nil
}

// Release implements Store.
func (s *LocalStore) Release(_ context.Context, k Key, windows []Window, member string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range windows {
		set := s.sets[localKey{k, w.Size}]
		if set == nil {
			continue
		}
		live := set.live()
		for i := range live {
			if live[i].member == member {
				copy(live[i:], live[i+1:])
				set.entries = set.entries[:len(set.entries)-1]
				break
			}
		}
	}
	return nil
}

// Usage implements Store.
func (s *LocalStore) Usage(_ context.Context, k Key, windows []Window) ([]int64, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int64, len(windows))
	for i, w := range windows {
		if set := s.sets[localKey{k, w.Size}]; set != nil {
			set.trim(now.Add(-w.Size))
			out[i] = int64(len(set.live()))
		}
	}
	return out, nil
}

// Ping implements Store; a LocalStore always answers.
func (s *LocalStore) Ping(context.Context) error { return nil }
