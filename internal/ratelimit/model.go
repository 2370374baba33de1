package ratelimit

import (
	"math/bits"
	"slices"
	"time"
)

// Model is the reference implementation of the window rules: pure,
// deterministic, with time passed in. Every store is property-tested against
// it (the Lua script on Redis, Redis Cluster and the embedded server), and
// the in-process fallback store runs on it. The rules:
//
//   - A request is a member (its requestId) with an amount, checked against
//     a list of windows, each of some key (the request's own key and, when
//     the document has one, its channel-wide key "*:CHANNEL"). Each window
//     has a limit and holds members with their weight: 1 in a count window,
//     the member's amount in an amount window. Its use is the sum of the
//     weights it holds.
//   - A sliding window of size S holds, at time now, the members admitted in
//     (now-S, now]: a member admitted at t leaves at exactly t+S. A calendar
//     window holds the members admitted in the current period of its
//     calendar (Calendar.Period); it is empty when a new period starts.
//   - Windows are identified by key and Window.ID: a limits change that
//     keeps a window's ID keeps its members and applies the new limit to
//     them.
//   - A member's identity is its name and the amount of its request. A
//     member checked with an amount other than the one a window holds it
//     with is a conflict: refused, recorded nowhere, whatever the windows'
//     room (Result.Conflict; the binding window is the first that holds it
//     with another amount). This rule comes before every other, so a retry
//     with a larger amount is never admitted at the old amount, and a full
//     window never hides a conflict.
//   - A member M of weight w in a window is admitted at now if and only if
//     every window either already holds M or has use + w ≤ limit. So a small
//     payment can pass an amount window after a large one was refused. When
//     M is admitted it is recorded, at now, in every window that does not
//     hold it yet. A refused member is recorded nowhere. So a retried member
//     is never counted twice in any window, and a member held by one full
//     window is no pass through another full window that does not hold it.
//   - Several members decided together (a batch) are decided one after the
//     other, in order, at the same instant.
//   - Retry-after, for a refused member, is the time until every refusing
//     window would take it: for a sliding window, until enough of its oldest
//     members have left that use + w ≤ limit (the window's size when that
//     needs members admitted at now, or when w alone exceeds the limit); for
//     a calendar window, until its next period starts. The longest of these.
//   - A refusing window whose weight alone is above its limit (an amount
//     above the cap) can never admit the request: the refusal exceeds a cap
//     (Result.ExceedsCap), and its binding window is the first such window,
//     whatever the others' waits (RetryAfter stays the longest wait, which
//     no retry needs; an in-process decision on a share of the limit uses
//     it).
//   - A request of a channel-wide key, or of a resolver key
//     ("RESOLVE:CHANNEL", ResolveBizType), is checked against its own key's
//     windows only; a request of any other key against its own key's and
//     its channel-wide key's (Key.CountsChannelWide). So a resolver query
//     is counted in no channel-wide window and in no reservation's use, and
//     no reservation keeps anything from it.
//   - Reservations: a channel-wide window may keep part of its limit for
//     named bizTypes (reserve: {REFUND: 2}). A request of bizType b is
//     admitted by such a window only if, after it, the window's use plus
//     every other name's unmet reservation (its reservation minus its own
//     use in the window, at least 0) stays within the limit. Each name's
//     own use is a window of its own (reserveKey, TrackOwn for the
//     request's bizType, TrackOther for the others), which never refuses;
//     a TrackOther window is only read. The wait of such a window is found
//     as for a sliding window whose limit is the limit less the unmet
//     reservations at now; it exceeds a cap only when the weight is above
//     the whole limit.
//   - Reservations shrink with the limit: when the limit in force L (a
//     learned limit, or a share of the limit in process) is below the sum
//     S of a window's reservations (the request's own included), each
//     name's reservation is ⌊reservation × L / S⌋, so that no name's
//     reservation exceeds L and a reserved name is never refused on a
//     window its reservation keeps room in.
//   - Limits per merchant: a window may limit each merchant's own use of
//     it (Rule.Merchants: a limit per merchant, and overrides; Unlimited is
//     no limit, 0 refuses the merchant). A request of merchant m (NoMerchant
//     when it names none) is then also checked against m's use of the
//     window: a window of its own (MerchantKey, KeyWindow.Merchant) with
//     the same span and unit and m's limit (trackingLimit when m has none,
//     so that its use is still counted), which follows every rule above as
//     any window does. So m is admitted only if both the window and m's use
//     of it have room, all or nothing across every window of the check; a
//     refusal by m's limit records nothing anywhere; identity, duplicates,
//     releases and calendar periods apply to m's use as to the window's;
//     and a refusal by m's limit waits for m's own use to fall. A member
//     the window holds is held by every merchant's use of it: a request of
//     merchant B for a member admitted for merchant A is a duplicate of
//     A's slot, checked against and recorded in no merchant's use. A
//     merchant's use does not learn: the window's learned limit binds the
//     window, and through it every merchant.
//   - Release removes a member from the windows given (all of a key's, or
//     only its amount windows, to give an amount back).
//   - Learned limits (learned.go): a sliding count window that learns
//     (KeyWindow.Learn) may have a learned limit, set by a throttle of the
//     channel (Throttle) and climbing back with time; its effective limit,
//     min(configured, learned) or 0 until the channel's retry-after, takes
//     the configured limit's place in the rules above.
//   - An admitted member's admission time (Result.At) is now for a member
//     newly recorded; for a member already held (Result.Duplicate), the
//     earliest time a sliding window holding it recorded it at, or now
//     when only calendar windows hold it (they keep no times).
//
// Times have the precision of Redis TIME, one microsecond: the model truncates
// to it. Time must not go backwards within a window; an earlier now is taken
// as the latest admission time already recorded. The zero Model is not
// usable; call NewModel. A Model is not safe for concurrent use.
type Model struct {
	sliding map[windowID]*queue
	periods map[windowID]*period
	// learned holds the learned limits of sliding count windows
	// (learned.go).
	learned map[windowID]learnedState
	// wall maps a check's time to the wall-clock time calendar periods are
	// found at; nil is the identity. LocalStore, whose clock is monotonic
	// from its start, sets it.
	wall func(time.Time) time.Time
	// slidingSweep and periodsSweep say when each map is swept
	// (sweepIfGrown). sweepAlways makes it sweep both every time: the
	// property tests set it on their oracle, so that a sweep that changed
	// a decision would part it from the stores.
	slidingSweep, periodsSweep sweeper
	sweepAlways                bool
}

// minSweep is the fewest entries of a map a sweep waits for.
const minSweep = 1024

// sweepSlack is how long past its last member's leaving a window is kept:
// as long as Redis keeps a window's key past it (the TTL margin of
// redisstore), so that the in-process stores forget a window when Redis
// would, a wall clock stepping back included.
const sweepSlack = 2 * time.Second

// sweepEvery is the longest a map of at least minSweep entries goes
// unswept, so that the windows of a burst leave soon after their members
// even when no new ones follow.
const sweepEvery = time.Minute

// sweeper says when one map of windows is swept: once it holds at least
// minSweep entries, and it has doubled since its last sweep or that sweep
// is sweepEvery old. A sweep walks the map, so the walks cost about one
// per doubling and one a minute. A Go map keeps the table of its largest
// size, and a walk costs that table: a sweep that leaves fewer than a
// quarter of the entries the map once held has it rebuilt.
type sweeper struct {
	next int   // the size from which a sweep is due
	last int64 // when the last sweep was (µs)
	peak int   // the most entries seen since the map was made
}

// due reports whether a map of n entries is to be swept at now (µs).
func (s *sweeper) due(n int, now int64) bool {
	return n >= minSweep && (n >= s.next || now-s.last >= sweepEvery.Microseconds())
}

// swept notes a sweep at now (µs) that took a map from before entries to
// after, and reports whether to rebuild it.
func (s *sweeper) swept(before, after int, now int64) (rebuild bool) {
	s.peak = max(s.peak, before)
	s.next, s.last = 2*after, now
	if after < s.peak/4 {
		s.peak = after
		return true
	}
	return false
}

// rebuilt returns a new map of m's entries, its table their size.
func rebuilt[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// sweepIfGrown sweeps each of the model's maps that is due (sweeper) at
// now (µs): the sliding windows whose every member left more than
// sweepSlack ago, and the periods that ended as long ago or hold nothing.
// A window is made for each merchant a request names, so without sweeps
// the model would keep one for every merchant ever seen. It is called
// before a check takes any window, never between: a window swept while a
// check holds it would record the check's member where no later check
// finds it.
func (m *Model) sweepIfGrown(now int64) {
	cut := now - sweepSlack.Microseconds()
	if n := len(m.sliding); m.slidingSweep.due(n, now) || m.sweepAlways {
		for id, q := range m.sliding {
			if q.n == 0 || q.get(q.n-1).at <= cut-id.size.Microseconds() {
				delete(m.sliding, id)
			}
		}
		if m.slidingSweep.swept(n, len(m.sliding), now) {
			m.sliding = rebuilt(m.sliding)
		}
	}
	if n := len(m.periods); m.periodsSweep.due(n, now) || m.sweepAlways {
		for id, p := range m.periods {
			if p.end <= cut || len(p.held) == 0 && p.used == 0 {
				delete(m.periods, id)
			}
		}
		if m.periodsSweep.swept(n, len(m.periods), now) {
			m.periods = rebuilt(m.periods)
		}
	}
}

// KeyWindow is one window of one key, with the limit that applies to the
// request at hand.
type KeyWindow struct {
	Key Key
	Window
	// Track marks a window that counts one named bizType's own use of a
	// channel-wide window with reservations (its key is reserveKey): the
	// request's own (TrackOwn: recorded, never refusing) or another's
	// (TrackOther: read for its use, never recorded, never refusing).
	Track Track
	// Reserved, on a window with reservations, lists the reservations of
	// the named bizTypes other than the request's, each with the index of
	// its TrackOther window in the same check.
	Reserved []Reserved
	// OwnReserve, on a window with reservations, is the request's own
	// bizType's reservation (0 when it has none): with Reserved it makes
	// the sum of the window's reservations, which they shrink to fit a
	// lower limit in force (KeyWindow.reservation).
	OwnReserve int64
	// Learn is the window's learned-limit setting (Adaptive resolved for
	// it); zero for a window that does not learn.
	Learn Learning
	// Merchant, on a window counting one merchant's own use of a window
	// with merchant limits (its key is MerchantKey), names the merchant;
	// empty for every other window.
	Merchant string
}

// Same reports whether w and o are one window of a check: the same key,
// window, track, learning, merchant and reservations (a limits change may
// give one key's window another of these between two checks).
func (w KeyWindow) Same(o KeyWindow) bool {
	return w.Key == o.Key && w.Window == o.Window && w.Track == o.Track && w.Learn == o.Learn && w.Merchant == o.Merchant && slices.Equal(w.Reserved, o.Reserved) && w.OwnReserve == o.OwnReserve
}

// Track says whether a window of a check counts a reservation's use.
type Track uint8

// The kinds of window of a check.
const (
	TrackNone  Track = iota // a window of the rules
	TrackOwn                // the request's bizType's use of a reserved window
	TrackOther              // another named bizType's use of a reserved window
)

// Reserved is one other bizType's reservation in a window: Amount kept for
// it, and the index of the window that counts its own use.
type Reserved struct {
	Index  int
	Amount int64
}

// trackingLimit is the limit of a tracking window: it never refuses.
const trackingLimit = 1 << 50

// reserveKey is the key of the windows that count bizType's own use of the
// reserved windows of channel: "*BIZTYPE" (never a bizType: codes hold no
// '*').
func reserveKey(channel, bizType string) Key {
	return Key{BizType: anyBizType + bizType, Channel: channel}
}

// unmet is the sum of the reservations of w not yet used by their bizTypes
// (each reservation in force under limit minus its own use, at least 0),
// from counts, the use of every window of the check.
func (w KeyWindow) unmet(counts []int64, limit int64) int64 {
	var sum int64
	for _, r := range w.Reserved {
		sum += max(w.reservation(r.Amount, limit)-counts[r.Index], 0)
	}
	return sum
}

// reservation is a name's reservation of amount in force in w under the
// limit in force: amount while the limit covers the sum S of w's
// reservations, else ⌊amount × limit / S⌋, so that the reservations
// together never exceed the limit and each keeps its part of it.
func (w KeyWindow) reservation(amount, limit int64) int64 {
	total := w.OwnReserve
	for _, r := range w.Reserved {
		total += r.Amount
	}
	return shrunk(amount, limit, total)
}

// shrunk is a reservation of amount, of reservations summing to total,
// under limit: amount when limit ≥ total, else ⌊amount × limit / total⌋.
func shrunk(amount, limit, total int64) int64 {
	switch {
	case limit >= total:
		return amount
	case limit <= 0:
		return 0
	}
	// amount ≤ total and limit < total: the quotient is below limit and
	// the high word below total, so Div64 cannot overflow.
	hi, lo := bits.Mul64(uint64(amount), uint64(limit))
	q, _ := bits.Div64(hi, lo, uint64(total))
	return int64(q)
}

// ReservationsInForce returns a window's reservations reserve as they
// apply under the limit in force (Model: each shrunk to its part of a
// limit below their sum), or nil when the limit covers them all.
func ReservationsInForce(reserve map[string]int64, limit int64) map[string]int64 {
	var total int64
	for _, n := range reserve {
		total += n
	}
	if limit >= total {
		return nil
	}
	out := make(map[string]int64, len(reserve))
	for name, n := range reserve {
		out[name] = shrunk(n, limit, total)
	}
	return out
}

// windowID names one stored window: its key and everything that defines
// the window but its limit (as Window.ID, without building a string).
type windowID struct {
	key      Key
	size     time.Duration
	amount   bool
	currency string
	unit     CalendarUnit
	zone     string
	cutoff   time.Duration
}

func idOf(w KeyWindow) windowID {
	id := windowID{key: w.Key, size: w.Size, amount: w.Amount, currency: w.Currency, unit: w.Calendar.Unit, cutoff: w.Calendar.Cutoff}
	if w.Calendar.Zone != nil {
		id.zone = w.Calendar.Zone.String()
	}
	return id
}

// period is one calendar window: the members of its current period.
type period struct {
	start int64 // µs
	end   int64 // µs
	held  map[string]heldWeight
	used  int64
}

// heldWeight is one member of a calendar period: its weight and the amount
// it was admitted for.
type heldWeight struct{ weight, amount int64 }

// NewModel returns a Model with every window empty.
func NewModel() *Model {
	return &Model{sliding: map[windowID]*queue{}, periods: map[windowID]*period{}, learned: map[windowID]learnedState{}}
}

// micros is t as whole microseconds, the model's time unit.
func micros(t time.Time) int64 { return t.UnixMicro() }

// slidingAt returns the sliding window w trimmed to now, creating it.
func (m *Model) slidingAt(w KeyWindow, now int64) *queue {
	id := idOf(w)
	q := m.sliding[id]
	if q == nil {
		q = &queue{}
		m.sliding[id] = q
	}
	q.trim(now - w.Size.Microseconds())
	return q
}

// periodAt returns the calendar window w in its period at now, emptied when
// a new period has started.
func (m *Model) periodAt(w KeyWindow, now time.Time) *period {
	id := idOf(w)
	start, end := m.period(w, now)
	p := m.periods[id]
	if p == nil || p.start != start {
		p = &period{start: start, end: end, held: map[string]heldWeight{}}
		m.periods[id] = p
	}
	return p
}

// period returns the calendar period of w holding now, in µs on the
// model's clock.
func (m *Model) period(w KeyWindow, now time.Time) (start, end int64) {
	if m.wall == nil {
		s, e := w.Calendar.Period(now)
		return micros(s), micros(e)
	}
	wall := m.wall(now)
	s, e := w.Calendar.Period(wall)
	return micros(now) - wall.Sub(s).Microseconds(), micros(now) + e.Sub(wall).Microseconds()
}

// slot is one window as a check sees it.
type slot struct {
	q *queue  // sliding
	p *period // calendar
}

func (s slot) used() int64 {
	if s.p != nil {
		return s.p.used
	}
	return s.q.sum
}

func (s slot) has(member string) bool {
	if s.p != nil {
		_, ok := s.p.held[member]
		return ok
	}
	return s.q.has(member)
}

// amountOf returns the amount member is held for, and whether it is held.
func (s slot) amountOf(member string) (int64, bool) {
	if s.p != nil {
		h, ok := s.p.held[member]
		return h.amount, ok
	}
	return s.q.amountOf(member)
}

// admittedAt returns the time (µs) a sliding window recorded member at, and
// whether it knows one: a calendar window keeps no times.
func (s slot) admittedAt(member string) (int64, bool) {
	if s.p != nil {
		return 0, false
	}
	return s.q.atOf(member)
}

func (s slot) add(member string, weight, amount, at int64) {
	if s.p != nil {
		s.p.held[member] = heldWeight{weight: weight, amount: amount}
		s.p.used += weight
		return
	}
	s.q.push(localEntry{member: member, at: at, weight: weight, amount: amount})
}

// wait is how long until window w (its slot s) takes weight more, at now.
func (s slot) wait(w Window, weight, now int64) time.Duration {
	if s.p != nil {
		return time.Duration(s.p.end-now) * time.Microsecond
	}
	size := w.Size.Microseconds()
	need := s.q.sum + weight - w.Limit
	if weight <= w.Limit {
		var freed int64
		for i := 0; i < s.q.len(); i++ {
			e := s.q.get(i)
			if freed += e.weight; freed >= need {
				return time.Duration(e.at+size-now) * time.Microsecond
			}
		}
	}
	return time.Duration(size) * time.Microsecond
}

// Check decides member, of amount, against windows at now and records it if
// admitted. Result.Counts holds every window's use after the decision. The
// binding window (Result.Window) is, for a refusal, the refusing window with
// the longest retry-after (the first of equals); for an admission, the
// window with the least room left (the first of equals). Result.At is, for
// an admission, now, or for a member already held the earliest time a
// sliding window holding it recorded (now when only calendar windows hold
// it); zero for a refusal.
func (m *Model) Check(windows []KeyWindow, member string, amount int64, now time.Time) StoreResult {
	if len(windows) == 0 {
		return StoreResult{Allowed: true}
	}
	at := micros(now)
	m.sweepIfGrown(at)
	slots := make([]slot, len(windows))
	res := StoreResult{Counts: make([]int64, len(windows)), Window: -1, Now: time.UnixMicro(at)}
	held, first := false, at // first: when the member was first admitted
	for i, w := range windows {
		if w.IsCalendar() {
			slots[i] = slot{p: m.periodAt(w, now)}
		} else {
			slots[i] = slot{q: m.slidingAt(w, at)}
		}
		res.Counts[i] = slots[i].used()
	}
	// The effective limits (learned.go): limits[i] now, after[i] once the
	// not-before nb[i] has passed; nil when no window learns.
	var limits, after, nb []int64
	for i, w := range windows {
		if !w.Learns() {
			continue
		}
		if limits == nil {
			limits, after, nb = make([]int64, len(windows)), make([]int64, len(windows)), make([]int64, len(windows))
			for j, o := range windows {
				limits[j], after[j] = o.Limit, o.Limit
			}
		}
		st, ok := m.learnedAt(w, at)
		limits[i], after[i], nb[i] = effective(w, st, ok, at)
		if limits[i] < w.Limit {
			res.Limits = limits
		}
	}
	limitOf := func(i int) int64 {
		if limits == nil {
			return windows[i].Limit
		}
		return limits[i]
	}
	for i, w := range windows {
		if w.Track == TrackOther {
			continue
		}
		if was, ok := slots[i].amountOf(member); ok && was != amount {
			res.Window, res.Count, res.Conflict = i, res.Counts[i], true
			return res
		}
	}
	// holds reports whether window i holds member: it records it, or it
	// counts a merchant's use of a window of the check that records it
	// (the member is that merchant's slot, or another's).
	parent := MerchantParents(windows)
	holds := func(i int) bool {
		return slots[i].has(member) || parent != nil && parent[i] >= 0 && slots[parent[i]].has(member)
	}
	for i, w := range windows {
		if w.Track == TrackOther {
			continue
		}
		used := res.Counts[i]
		if holds(i) {
			held = true
			if since, ok := slots[i].admittedAt(member); ok && since < first {
				first = since
			}
			continue
		}
		if w.Track == TrackOwn {
			continue
		}
		weight := w.Weight(amount)
		if used+weight <= limitOf(i)-w.unmet(res.Counts, limitOf(i)) {
			continue
		}
		lw := w.Window
		lw.Limit = w.Limit - w.unmet(res.Counts, w.Limit)
		if after != nil {
			lw.Limit = after[i] - w.unmet(res.Counts, after[i])
		}
		var wait time.Duration
		if used+weight > lw.Limit {
			wait = slots[i].wait(lw, weight, at)
		}
		if nb != nil && at < nb[i] {
			wait = max(wait, time.Duration(nb[i]-at)*time.Microsecond)
		}
		if weight > w.Limit && !res.ExceedsCap {
			res.Window, res.Count, res.ExceedsCap = i, used, true
		}
		if res.Window < 0 || (wait > res.RetryAfter && !res.ExceedsCap) {
			res.Window, res.Count = i, used
		}
		res.RetryAfter = max(res.RetryAfter, wait)
	}
	if res.Window >= 0 {
		return res
	}
	res.Allowed, res.Duplicate, res.At = true, held, time.UnixMicro(first)
	var before []bool // the merchants' uses that held member before it is recorded
	if parent != nil {
		before = make([]bool, len(windows))
		for i := range windows {
			before[i] = holds(i)
		}
	}
	for i, w := range windows {
		if w.Track == TrackOther {
			continue
		}
		if before != nil && !before[i] || before == nil && !slots[i].has(member) {
			slots[i].add(member, w.Weight(amount), amount, at)
			res.Counts[i] = slots[i].used()
		}
		if w.Track != TrackNone {
			continue
		}
		// Room can be negative: a lowered limit under members already in.
		if res.Window < 0 || limitOf(i)-res.Counts[i] < limitOf(res.Window)-res.Counts[res.Window] {
			res.Window, res.Count = i, res.Counts[i]
		}
	}
	return res
}

// Release removes member from every window given, and reports whether
// some window held it.
func (m *Model) Release(windows []KeyWindow, member string) (found bool) {
	for _, w := range windows {
		id := idOf(w)
		if w.IsCalendar() {
			if p := m.periods[id]; p != nil {
				if h, ok := p.held[member]; ok {
					delete(p.held, member)
					p.used -= h.weight
					found = true
				}
			}
		} else if q := m.sliding[id]; q != nil && q.has(member) {
			q.remove(member)
			found = true
		}
	}
	return found
}

// ReleaseIfAmount removes member from each window given that holds it for
// amount, and reports whether some window did. A record of the member for
// another amount is another admission's (the limiter refuses a member held
// for another amount, so a check for this amount recorded nothing there)
// and stays: what a caller that cannot know whether its check was
// recorded (its answer was lost) may release.
func (m *Model) ReleaseIfAmount(windows []KeyWindow, member string, amount int64) (found bool) {
	for _, w := range windows {
		id := idOf(w)
		if w.IsCalendar() {
			if p := m.periods[id]; p != nil {
				if h, ok := p.held[member]; ok && h.amount == amount {
					delete(p.held, member)
					p.used -= h.weight
					found = true
				}
			}
		} else if q := m.sliding[id]; q != nil {
			if was, ok := q.amountOf(member); ok && was == amount {
				q.remove(member)
				found = true
			}
		}
	}
	return found
}

// Usage returns the use of each window at now.
func (m *Model) Usage(windows []KeyWindow, now time.Time) []int64 {
	at := micros(now)
	out := make([]int64, len(windows))
	for i, w := range windows {
		id := idOf(w)
		if w.IsCalendar() {
			if p := m.periods[id]; p != nil {
				if start, _ := m.period(w, now); p.start == start {
					out[i] = p.used
				}
			}
		} else if q := m.sliding[id]; q != nil {
			q.trim(at - w.Size.Microseconds())
			out[i] = q.sum
		}
	}
	return out
}

// retain forgets every window for which keep is false.
func (m *Model) retain(keep func(id windowID) bool) {
	for id := range m.sliding {
		if !keep(id) {
			delete(m.sliding, id)
		}
	}
	for id := range m.periods {
		if !keep(id) {
			delete(m.periods, id)
		}
	}
	for id := range m.learned {
		if !keep(id) {
			delete(m.learned, id)
		}
	}
}

// addIdentity records member in window w at now with no weight, admitted
// for amount: it counts nothing, and a check of the member finds it held
// (a duplicate for amount, a conflict for another). The limiter's fallback
// uses it for the members Redis admitted in windows it does not copy.
func (m *Model) addIdentity(w KeyWindow, member string, amount int64, now time.Time) {
	if w.IsCalendar() {
		m.periodAt(w, now).held[member] = heldWeight{weight: 0, amount: amount}
		return
	}
	m.slidingAt(w, micros(now)).push(localEntry{member: member, at: micros(now), weight: 0, amount: amount})
}

// holds reports whether window w holds member at now.
func (m *Model) holds(w KeyWindow, member string, now time.Time) bool {
	// A window the model does not hold holds nothing: asking makes none.
	if w.IsCalendar() {
		return m.periods[idOf(w)] != nil && m.periodAt(w, now).has(member)
	}
	if m.sliding[idOf(w)] == nil {
		return false
	}
	return m.slidingAt(w, micros(now)).has(member)
}

func (p *period) has(member string) bool {
	_, ok := p.held[member]
	return ok
}

// stay is how long, in µs, a member admitted at now stays in w: its size,
// or until the end of the current calendar period.
func (w Window) stay(now time.Time) int64 {
	if w.IsCalendar() {
		_, end := w.Calendar.Period(now)
		return micros(end) - micros(now)
	}
	return w.Size.Microseconds()
}

// Decide applies the rules of cfg to request r at now (applicable) and
// checks it. It returns the windows checked and the result.
func (m *Model) Decide(cfg *Config, r Request, now time.Time) ([]KeyWindow, StoreResult) {
	windows := applicable(cfg, r, now)
	return windows, m.Check(windows, r.Member, r.Amount, now)
}

// CountsChannelWide reports whether a request of key k is also counted in
// the channel-wide windows of its channel ("*:CHANNEL", reservations
// included): every key but a channel-wide one and a resolver key
// (ResolveBizType). It is the one place that rule is written: applicable,
// ReleaseKey and the Limiter's plans follow it.
func (k Key) CountsChannelWide() bool { return !k.IsChannelWide() && !k.IsResolve() }

// applicable returns the windows that apply to request r under cfg at now:
// the rules in force at now (a schedule replaces a key's rule from its start,
// inclusive, to its end, exclusive) of the request's key and, when it counts
// there (Key.CountsChannelWide), of its channel-wide key, in that order; of
// each, the windows that count the request (every count window; an amount
// window only for a request with an amount in its currency, or in any
// currency when it names none), each with its rule's learning setting
// (Rule.Adaptive: on for sliding count windows unless Off), and after a
// window with merchant limits the window counting the request's merchant's
// use of it (NoMerchant for a request naming none); a window with
// reservations with its whole limit, the other names' reservations (Reserved) and, after all the
// windows, one tracking window per named bizType (TrackOwn for the
// request's, TrackOther for the others', in the names' order). Shadow rules
// are not modelled. (The Limiter refuses a request one of whose windows has
// limit 0, a closed key, before any store is asked, even a retry of a
// member the windows hold: closed is closed.) A request counted regardless
// (Request.Regardless: a payment a channel reported paid after its order
// ended) has the same windows with no limit, learning or reservation: it
// is recorded wherever it is not held, refused only as a conflict.
func applicable(cfg *Config, r Request, now time.Time) []KeyWindow {
	keys := []Key{r.Key}
	if r.Key.CountsChannelWide() {
		keys = append(keys, ChannelWide(r.Key.Channel))
	}
	var windows, tracking []KeyWindow
	for _, k := range keys {
		rule := cfg.Rules[k]
		for _, s := range cfg.Schedules {
			if s.Key == k && !now.Before(s.From) && now.Before(s.To) {
				rule = s.Rule
			}
		}
		for i, w := range rule.Windows {
			if w.Amount && (r.Amount <= 0 || (w.Currency != "" && w.Currency != r.Currency)) {
				continue
			}
			kw := KeyWindow{Key: k, Window: w, Learn: rule.learning(i)}
			if i < len(rule.Reserve) {
				names := make([]string, 0, len(rule.Reserve[i]))
				for n := range rule.Reserve[i] {
					names = append(names, n)
				}
				slices.Sort(names)
				for _, n := range names {
					t := KeyWindow{Key: reserveKey(k.Channel, n), Window: w, Track: TrackOther}
					t.Limit = trackingLimit
					if n == r.Key.BizType {
						t.Track = TrackOwn
						kw.OwnReserve = rule.Reserve[i][n]
					} else {
						kw.Reserved = append(kw.Reserved, Reserved{Index: -1 - len(tracking), Amount: rule.Reserve[i][n]})
					}
					tracking = append(tracking, t)
				}
			}
			windows = append(windows, kw)
			if ml := rule.MerchantsOf(i); ml != nil {
				windows = append(windows, merchantWindow(k, w, ml, requestMerchant(r.Merchant)))
			}
		}
	}
	// The tracking windows come last; Reserved indexes point at them.
	for i := range windows {
		for j, rv := range windows[i].Reserved {
			windows[i].Reserved[j].Index = len(windows) - 1 - rv.Index
		}
	}
	all := append(windows, tracking...)
	if r.Regardless {
		// Money moved under the slot: the same windows record it, none
		// with a limit that could refuse it.
		for i, w := range all {
			all[i] = KeyWindow{Key: w.Key, Window: w.Window, Track: w.Track, Merchant: w.Merchant}
			all[i].Limit = trackingLimit
		}
	}
	return all
}

// ReleaseKey removes member from every window the model holds of key and,
// when key counts there (Key.CountsChannelWide), of its channel-wide key and
// its own use of that key's reservations, and from every merchant's use of
// those windows, whatever rule made them; only
// from their amount windows when amountsOnly (a declined payment's
// give-back).
func (m *Model) ReleaseKey(key Key, member string, amountsOnly bool) {
	wide := key.CountsChannelWide()
	ours := func(id windowID) bool {
		k := id.key.base() // a merchant's use of a window goes with the window
		mine := k == key || wide && (k == ChannelWide(key.Channel) || k == reserveKey(key.Channel, key.BizType))
		return mine && (id.amount || !amountsOnly)
	}
	for id, q := range m.sliding {
		if ours(id) {
			q.remove(member)
		}
	}
	for id, p := range m.periods {
		if h, ok := p.held[member]; ok && ours(id) {
			delete(p.held, member)
			p.used -= h.weight
		}
	}
}

// put records member in window w as admitted at at with weight and amount,
// as a compacted journal says (DurableStore); a window that holds it
// already is left as it is.
func (m *Model) put(w KeyWindow, member string, weight, amount int64, at time.Time) {
	if w.IsCalendar() {
		p := m.periodAt(w, at)
		if !p.has(member) {
			slot{p: p}.add(member, weight, amount, micros(at))
		}
		return
	}
	q := m.slidingAt(w, micros(at))
	if !q.has(member) {
		q.push(localEntry{member: member, at: micros(at), weight: weight, amount: amount})
	}
}

// holdings calls f for every member a window holds at now, with the window
// (its limit 0: a window's identity has none), weight, amount and
// admission time (µs; a calendar member's is its period's start).
func (m *Model) holdings(now time.Time, f func(w KeyWindow, member string, weight, amount, at int64)) {
	window := func(id windowID) (KeyWindow, bool) {
		w := KeyWindow{Key: id.key, Window: Window{Size: id.size, Amount: id.amount, Currency: id.currency}}
		if id.unit != "" {
			zone, err := time.LoadLocation(id.zone)
			if err != nil {
				return w, false
			}
			w.Calendar = Calendar{Unit: id.unit, Zone: zone, Cutoff: id.cutoff}
		}
		return w, true
	}
	at := micros(now)
	for id, q := range m.sliding {
		w, ok := window(id)
		if !ok {
			continue
		}
		q.trim(at - id.size.Microseconds())
		for i := 0; i < q.len(); i++ {
			e := q.get(i)
			f(w, e.member, e.weight, e.amount, e.at)
		}
	}
	for id, p := range m.periods {
		w, ok := window(id)
		if !ok || p.end <= at {
			continue
		}
		for member, h := range p.held {
			f(w, member, h.weight, h.amount, p.start)
		}
	}
}
