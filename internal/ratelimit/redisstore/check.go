package redisstore

import (
	"context"
	"fmt"
	"time"

	"payserver/internal/batch"
	"payserver/internal/ratelimit"
)

// The check script's calling convention: its KEYS and ARGV for a check of
// one or more members, and its reply read back into results.

// checkKeys returns the KEYS of a check: keys(windows), then the
// learned-limit hash of each learning window (learnedKey). Members add no
// keys: a sliding count window's records of their amounts are named by
// the script (identity.lua).
func (s *Store) checkKeys(windows []ratelimit.KeyWindow) []string {
	keys := s.keys(windows)
	for i, w := range windows {
		if w.Learns() {
			keys = append(keys, learnedKey(keys[i]))
		}
	}
	return keys
}

// checkOne checks one member in one script call.
func (s *Store) checkOne(ctx context.Context, windows []ratelimit.KeyWindow, member string, amount int64) (ratelimit.StoreResult, error) {
	m := checkMember{member, amount}
	nowMicros, periodsAt := s.at()
	res, err := s.runCheck(ctx, windows, s.checkKeys(windows), checkArgsAt(nowMicros, periodsAt, windows, m))
	if err != nil {
		return ratelimit.StoreResult{}, err
	}
	var out [1]ratelimit.StoreResult
	if err := parseCheckReply(res, len(windows), out[:]); err != nil {
		return ratelimit.StoreResult{}, err
	}
	return out[0], nil
}

// ttlMargin is added to the time a member can stay in a window for the
// keys' TTL. A key must not expire while its newest member is still in a
// window: with Redis, a TTL equal to the window is exact, but the embedded
// server counts TTLs down in one-second ticks (miniredis FastForward), so a
// key could vanish up to a tick early and admit a whole limit again.
const ttlMargin = 2 * time.Second

// checkMember is one member of a check and what it pays.
type checkMember struct {
	id     string
	amount int64
}

// checkArgs returns checkScript's ARGV for members, with the time read from
// Redis and calendar periods around the app server's clock (production,
// without Options.Now).
func checkArgs(windows []ratelimit.KeyWindow, members ...checkMember) []any {
	return checkArgsAt(0, time.Now(), windows, members...)
}

// checkArgsAt is checkArgs with the time: 0 for Redis TIME (production), or
// µs since the epoch (property tests drive time through it); periodsAt is
// the time the calendar periods are computed around.
func checkArgsAt(nowMicros int64, periodsAt time.Time, windows []ratelimit.KeyWindow, members ...checkMember) []any {
	return checkArgsOwn(nowMicros, periodsAt, windows, nil, members)
}

// checkArgsOwn is checkArgsAt for members that name their own windows
// (own[j]: member j's windows, as indexes into windows, in its order;
// nil when every member has all of them).
func checkArgsOwn(nowMicros int64, periodsAt time.Time, windows []ratelimit.KeyWindow, own [][]int, members []checkMember) []any {
	n := len(windows)
	per := 2
	if own != nil {
		n, per = -n, 2+len(own[0])
	}
	args := make([]any, 0, 5+argsPerWindow*len(windows)+per*len(members))
	args = append(args, ttlMargin.Milliseconds(), nowMicros, n)
	args = appendWindowArgs(args, periodsAt, windows)
	args = appendReservedArgs(args, windows)
	args = appendLearningArgs(args, windows)
	if own != nil {
		args = append(args, len(own[0]))
	}
	for j, m := range members {
		args = append(args, m.id, m.amount)
		if own != nil {
			for _, i := range own[j] {
				args = append(args, i+1)
			}
		}
	}
	return args
}

// appendWindowArgs appends the scripts' arguments for each window: kind,
// limit, size (µs), four calendar period boundaries (µs), and its track
// plus 4 × the 1-based index of the window whose merchant's use it counts
// (MerchantParents; 0 for none).
func appendWindowArgs(args []any, periodsAt time.Time, windows []ratelimit.KeyWindow) []any {
	parent := ratelimit.MerchantParents(windows)
	for i, w := range windows {
		track := int(w.Track)
		if parent != nil {
			track += 4 * (parent[i] + 1)
		}
		kind := windowKind(w)
		if w.IsCalendar() {
			b := w.Calendar.Periods(periodsAt)
			args = append(args, kind, w.Limit, 0, micros(b[0]), micros(b[1]), micros(b[2]), micros(b[3]), track)
			continue
		}
		args = append(args, kind, w.Limit, w.Size.Microseconds(), 0, 0, 0, 0, track)
	}
	return args
}

// appendReservedArgs appends the check script's reservations: their
// number, then for each the window it applies to, the window counting the
// other name's use (both 1-based), the reservation and the sum of the
// window's reservations.
func appendReservedArgs(args []any, windows []ratelimit.KeyWindow) []any {
	n := 0
	for _, w := range windows {
		n += len(w.Reserved)
	}
	args = append(args, n)
	for i, w := range windows {
		total := w.OwnReserve
		for _, r := range w.Reserved {
			total += r.Amount
		}
		for _, r := range w.Reserved {
			args = append(args, i+1, r.Index+1, r.Amount, total)
		}
	}
	return args
}

// appendLearningArgs appends the check script's learning windows: their
// number, then for each the window (1-based) and its step.
func appendLearningArgs(args []any, windows []ratelimit.KeyWindow) []any {
	n := 0
	for _, w := range windows {
		if w.Learns() {
			n++
		}
	}
	args = append(args, n)
	for i, w := range windows {
		if w.Learns() {
			args = append(args, i+1, w.Learn.Step)
		}
	}
	return args
}

// parseCheckReply fills out, one result per member, from checkScript's
// reply: the call's time (µs), the number of windows bound by a learned
// limit and, when not 0, every window's effective limit, then 4+windows
// integers per member.
func parseCheckReply(res []int64, windows int, out []ratelimit.StoreResult) error {
	return parseCheckReplyOwn(res, windows, nil, out)
}

// parseCheckReplyOwn is parseCheckReply for members that name their own
// windows (own, as for checkArgsOwn): each member's result is for its own
// windows, in its own order.
func parseCheckReplyOwn(res []int64, n int, own [][]int, out []ratelimit.StoreResult) error {
	windows := n
	if own != nil {
		windows = len(own[0])
	}
	per := 4 + windows
	head := 2
	if len(res) >= 2 && res[1] > 0 {
		head += n
	}
	if len(res) != head+per*len(out) {
		return fmt.Errorf("redisstore: script replied %d values for %d checks", len(res), len(out))
	}
	now := res[0]
	var limits []int64
	if head > 2 {
		limits = res[2:head:head]
	}
	for i := range out {
		r := res[head+per*i : head+per*(i+1)]
		if r[1] < 1 || int(r[1]) > windows {
			return fmt.Errorf("redisstore: unexpected script reply %v", r)
		}
		counts := r[4:per:per]
		lim := limits
		if own != nil && limits != nil {
			lim = make([]int64, windows)
			for p, w := range own[i] {
				lim[p] = limits[w]
			}
		}
		out[i] = ratelimit.StoreResult{
			Allowed:    r[0] == 1,
			Window:     int(r[1]) - 1,
			Count:      counts[r[1]-1],
			Counts:     counts,
			Duplicate:  r[3] == 1,
			Conflict:   r[3] == 2,
			ExceedsCap: r[3] == 3,
			Limits:     lim,
			Now:        time.UnixMicro(now),
		}
		if out[i].Allowed {
			// r[2] is how long before now the member was first admitted.
			out[i].At = time.UnixMicro(now - r[2])
		} else {
			out[i].RetryAfter = time.Duration(r[2]) * time.Microsecond
		}
	}
	return nil
}

// runCheck runs the check script for windows with Script.Run: EVALSHA,
// and EVAL after NOSCRIPT. keys and args are checkKeys' and checkArgs'
// for windows; a plain key's check runs plainCheckScript, which reads
// them the same way.
func (s *Store) runCheck(ctx context.Context, windows []ratelimit.KeyWindow, keys []string, args []any) ([]int64, error) {
	if plainWindows(windows) {
		res, err := plainCheckScript.Run(ctx, s.client, keys, args...).Int64Slice()
		if err != nil || len(res) != 2 || res[1] != -1 {
			return res, err
		}
		// A learned limit is in force: the plain script changed nothing,
		// and the general one applies it.
	}
	return checkScript.Run(ctx, s.client, keys, args...).Int64Slice()
}

// plainWindows reports whether windows are one sliding count window of a
// rule's own, with no reservation: plainCheckScript's (which hands a
// window under a learned limit to checkScript).
func plainWindows(windows []ratelimit.KeyWindow) bool {
	if len(windows) != 1 {
		return false
	}
	w := windows[0]
	return !w.Amount && !w.IsCalendar() && w.Track == ratelimit.TrackNone && len(w.Reserved) == 0
}

// windowKind is w's kind as the scripts receive it.
func windowKind(w ratelimit.KeyWindow) int {
	kind := kindCount
	if w.Amount {
		kind |= kindAmount
	}
	if w.IsCalendar() {
		kind |= kindCalendar
	}
	return kind
}

// BatchCheck is one check of a batch (CheckBatch): a member, its amount,
// and its windows.
type BatchCheck struct {
	Windows []ratelimit.KeyWindow
	Member  string
	Amount  int64
}

// CheckBatch decides checks in order in ONE script call, as the coalescer
// sends the checks of one key that queued behind a call in flight: each
// check's answer is the one a call of its own alone would give at the same
// instant. One call carries the longest run of checks, from the first,
// that it can (the coalescer's: the same windows, but for each merchant's
// use of a window, each check naming its own merchant's); it returns their
// results, fewer than checks when the rest need another call. It is how
// the property tests hold a coalesced call to the model; unlike Check, it
// neither splits at MaxBatch nor marks an error ErrNotSent, and every
// check must have windows.
func (s *Store) CheckBatch(ctx context.Context, checks []BatchCheck) ([]ratelimit.StoreResult, error) {
	if len(checks) == 0 {
		return nil, nil
	}
	for i, c := range checks {
		if len(c.Windows) == 0 {
			return nil, fmt.Errorf("redisstore: check %d of a batch has no windows", i)
		}
	}
	calls := make([]*batch.Call[checkArg, ratelimit.StoreResult], len(checks))
	for i, c := range checks {
		calls[i] = &batch.Call[checkArg, ratelimit.StoreResult]{Arg: checkArg{windows: c.Windows, member: checkMember{c.Member, c.Amount}}}
	}
	out, err := s.checkCalls(ctx, calls[:fit(calls)])
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkCalls decides the checks of calls, which fit lets through whole, in
// one script call: one result per call, zero values with the error.
func (s *Store) checkCalls(ctx context.Context, calls []*batch.Call[checkArg, ratelimit.StoreResult]) ([]ratelimit.StoreResult, error) {
	windows, own := oneCall(calls)
	members := make([]checkMember, len(calls))
	for i, c := range calls {
		members[i] = c.Arg.member
	}
	nowMicros, periodsAt := s.at()
	res, err := s.runCheck(ctx, windows, s.checkKeys(windows), checkArgsOwn(nowMicros, periodsAt, windows, own, members))
	out := make([]ratelimit.StoreResult, len(calls))
	if err == nil {
		err = parseCheckReplyOwn(res, len(windows), own, out)
	}
	return out, err
}
