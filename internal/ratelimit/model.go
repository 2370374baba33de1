package ratelimit

import "time"

// Model is the reference implementation of the window rules: pure,
// deterministic, with time passed in. Every store is property-tested against
// it (the Lua script on Redis, Redis Cluster and the embedded server), and
// the in-process fallback store runs on it. The rules:
//
//   - A key has one or more windows. Each window has a limit and a size and
//     holds members (requestIds) with their admission time. A window of size
//     S holds, at time now, the members admitted in (now-S, now]: a member
//     admitted at t leaves at exactly t+S.
//   - Windows are identified by their size: a limits change that keeps a size
//     keeps that window's members and applies the new limit to them.
//   - A member M is admitted at now if and only if every window of its key
//     either holds fewer members than its limit or already holds M. When M
//     is admitted it is recorded, at now, in every window that does not hold
//     it yet. A refused member is recorded nowhere. So a retried member is
//     never counted twice in any window, and a member held by one full window
//     is no pass through another full window that does not hold it.
//   - Several members decided together (a batch) are decided one after the
//     other, in order, at the same instant.
//   - Retry-after, for a refused member, is the time until every refusing
//     window has room for it: for each refusing window, until the member of
//     rank count-limit (0 = oldest) leaves; the longest of these. A window
//     with limit 0 never has room; its retry-after is its size.
//   - Release removes a member from every window of the key.
//
// Times have the precision of Redis TIME, one microsecond: the model truncates
// to it. Time must not go backwards within a key; an earlier now is taken as
// the latest admission time already recorded. The zero Model is not usable;
// call NewModel. A Model is not safe for concurrent use.
type Model struct {
	windows map[windowID]*queue
}

// windowID names one window of one key.
type windowID struct {
	key  Key
	size time.Duration
}

// NewModel returns a Model with every window empty.
func NewModel() *Model { return &Model{windows: map[windowID]*queue{}} }

// micros is t as whole microseconds, the model's time unit.
func micros(t time.Time) int64 { return t.UnixMicro() }

// window returns the window of size for k trimmed to now, creating it.
func (m *Model) window(k Key, size time.Duration, now int64) *queue {
	id := windowID{k, size}
	q := m.windows[id]
	if q == nil {
		q = &queue{}
		m.windows[id] = q
	}
	q.trim(now - size.Microseconds())
	return q
}

// Check decides member against windows of k at now and records it if
// admitted. Result.Counts holds every window's occupancy after the decision.
// The binding window (Result.Window) is, for a refusal, the refusing window
// with the longest retry-after (the first of equals); for an admission, the
// window with the least room left (the first of equals).
func (m *Model) Check(k Key, windows []Window, member string, now time.Time) StoreResult {
	if len(windows) == 0 {
		return StoreResult{Allowed: true}
	}
	at := micros(now)
	qs := make([]*queue, len(windows))
	res := StoreResult{Counts: make([]int64, len(windows)), Window: -1}
	held := false
	for i, w := range windows {
		q := m.window(k, w.Size, at)
		qs[i] = q
		count := int64(q.len())
		res.Counts[i] = count
		if q.has(member) {
			held = true
			continue
		}
		if count < w.Limit {
			continue
		}
		wait := w.Size
		if r := count - w.Limit; w.Limit > 0 && r < count {
			wait = time.Duration(q.get(int(r)).at+w.Size.Microseconds()-at) * time.Microsecond
		}
		if res.Window < 0 || wait > res.RetryAfter {
			res.Window, res.RetryAfter, res.Count = i, wait, count
		}
	}
	if res.Window >= 0 {
		return res
	}
	res.Allowed, res.Duplicate = true, held
	for i, w := range windows {
		if !qs[i].has(member) {
			qs[i].push(localEntry{member: member, at: at})
			res.Counts[i]++
		}
		// Room can be negative: a lowered limit under members already in.
		if res.Window < 0 || w.Limit-res.Counts[i] < windows[res.Window].Limit-res.Counts[res.Window] {
			res.Window, res.Count = i, res.Counts[i]
		}
	}
	return res
}

// CheckBatch decides members one after the other at the same instant, as
// Check would for each in turn.
func (m *Model) CheckBatch(k Key, windows []Window, members []string, now time.Time) []StoreResult {
	out := make([]StoreResult, len(members))
	for i, member := range members {
		out[i] = m.Check(k, windows, member, now)
	}
	return out
}

// Release removes member from every window of k.
func (m *Model) Release(k Key, windows []Window, member string) {
	for _, w := range windows {
		if q := m.windows[windowID{k, w.Size}]; q != nil {
			q.remove(member)
		}
	}
}

// Usage returns the occupancy of each window of k at now.
func (m *Model) Usage(k Key, windows []Window, now time.Time) []int64 {
	at := micros(now)
	out := make([]int64, len(windows))
	for i, w := range windows {
		if q := m.windows[windowID{k, w.Size}]; q != nil {
			q.trim(at - w.Size.Microseconds())
			out[i] = int64(q.len())
		}
	}
	return out
}

// Retain forgets every window for which keep is false.
func (m *Model) Retain(keep func(k Key, size time.Duration) bool) {
	for id := range m.windows {
		if !keep(id.key, id.size) {
			delete(m.windows, id)
		}
	}
}
