package redisstore

import (
	"context"
	"slices"
	"sync"
	"time"

	"payserver/internal/batch"
	"payserver/internal/ratelimit"
)

// defaultMaxBatch bounds one coalesced call when Options.MaxBatch
// is zero.
const defaultMaxBatch = 128

// batchTimeout bounds one coalesced call; its callers' own deadlines (the
// limiter's 50 ms) end it sooner once they have all left.
const batchTimeout = 5 * time.Second

// coalescer groups the concurrent checks of one key into single script
// calls, with one batch.Batcher per key: a check that finds its key idle is
// sent at once, by its own goroutine and under its own context, exactly as
// without coalescing; checks of that key arriving while a call of it is in
// flight queue and go together in the next call.
//
// A key's calls never overlap, so arrival order is decision order, except
// that checks whose windows differ from the batch's (limits changed
// meanwhile) wait for a later call. Exactness does not depend on the order
// either way: each call is one atomic script, which counts a member (a
// requestId) at most once whichever call carries it first, and a refusal is
// remembered by the near-cache only if no release happened while it was
// decided (the limiter's near-cache).
type coalescer struct {
	s   *Store
	max int
	// keys maps each key checked to its *batch.Batcher. Only keys with
	// limits reach the store, so this is bounded by the limits documents.
	keys sync.Map
}

type checkArg struct {
	windows []ratelimit.KeyWindow
	member  checkMember
}

type keyBatcher = batch.Batcher[checkArg, ratelimit.StoreResult]

func newCoalescer(s *Store, maxBatch int) *coalescer {
	if maxBatch <= 0 {
		maxBatch = defaultMaxBatch
	}
	return &coalescer{s: s, max: maxBatch}
}

// check decides one check: at once if no call of its key is in flight,
// else with the next batch of the key. A queued caller that
// leaves on ctx may still be decided (and, if admitted, recorded) by a call
// already on its way, as with a plain client whose reply came too late.
func (c *coalescer) check(ctx context.Context, windows []ratelimit.KeyWindow, member string, amount int64) (ratelimit.StoreResult, error) {
	k := windows[0].Key // the request's own key comes first
	b, ok := c.keys.Load(k)
	if !ok {
		b, _ = c.keys.LoadOrStore(k, c.newBatcher())
	}
	return b.(*keyBatcher).Do(ctx, checkArg{windows: windows, member: checkMember{member, amount}})
}

func (c *coalescer) newBatcher() *keyBatcher {
	return &keyBatcher{
		Max:     c.max,
		Timeout: batchTimeout,
		// One call serves checks of one set of windows, each merchant's
		// use of a window with merchant limits aside: each check names
		// its own merchant's (oneCall).
		Fit: fit,
		One: func(ctx context.Context, a checkArg) (ratelimit.StoreResult, error) {
			return c.s.checkOne(ctx, a.windows, a.member.id, a.member.amount)
		},
		Many: func(ctx context.Context, calls []*batch.Call[checkArg, ratelimit.StoreResult]) {
			out, err := c.s.checkCalls(ctx, calls)
			for i, call := range calls {
				call.Res, call.Err = out[i], err
			}
		},
	}
}

// stats returns the script calls sent and the checks they decided, over all
// keys.
func (c *coalescer) stats() (calls, checks uint64) {
	c.keys.Range(func(_, b any) bool {
		st := b.(*keyBatcher).Stats()
		// A batch of n checks is one call; a check served alone is one.
		calls += uint64(st.Calls - st.Batched + st.Batches)
		checks += uint64(st.Calls)
		return true
	})
	return calls, checks
}

// fit is how many of calls, taken in order, one call can carry: checks of
// the first check's windows, each merchant's use of a window aside, and
// each merchant's use of a window the same in every check that names it
// (a limits change between two checks of one merchant may differ in its
// limit).
func fit(calls []*batch.Call[checkArg, ratelimit.StoreResult]) int {
	first := calls[0].Arg.windows
	var seen map[mwKey]ratelimit.KeyWindow
	for i, call := range calls {
		ws := call.Arg.windows
		if slices.EqualFunc(ws, first, ratelimit.KeyWindow.Same) {
			continue
		}
		if !slices.EqualFunc(ws, first, batchable) {
			return i
		}
		if seen == nil {
			seen = map[mwKey]ratelimit.KeyWindow{}
		}
		for p, w := range ws {
			if w.Same(first[p]) {
				continue
			}
			if o, ok := seen[mwKey{w.Key, p}]; w.Key == first[p].Key || ok && !o.Same(w) {
				return i
			}
			seen[mwKey{w.Key, p}] = w
		}
	}
	return len(calls)
}

// batchable reports whether one call can carry a and b at the same place
// of two checks: they are the same window, or two merchants' uses of the
// same window (their limits may differ, by an override).
func batchable(a, b ratelimit.KeyWindow) bool {
	if a.Same(b) {
		return true
	}
	if a.Merchant == "" || b.Merchant == "" || a.Track != b.Track || a.Learn != b.Learn ||
		len(a.Reserved) != 0 || len(b.Reserved) != 0 || a.OwnReserve != b.OwnReserve {
		return false
	}
	aw, bw := a.Window, b.Window
	aw.Limit, bw.Limit = 0, 0
	ab, _, _ := a.Key.Merchant()
	bb, _, _ := b.Key.Merchant()
	return aw == bw && ab == bb
}

// oneCall returns the windows of one call for a batch Fit let through, and
// for each check its own windows among them (indexes, in its order), or
// nil when every check has the same windows. The first check's windows come
// first, in its order; each other merchant's use of a window is added
// once, for all the checks of that merchant.
func oneCall(calls []*batch.Call[checkArg, ratelimit.StoreResult]) ([]ratelimit.KeyWindow, [][]int) {
	first := calls[0].Arg.windows
	var (
		windows []ratelimit.KeyWindow
		own     [][]int
		added   map[mwKey]int
	)
	for j, call := range calls {
		ws := call.Arg.windows
		if own == nil {
			if slices.EqualFunc(ws, first, ratelimit.KeyWindow.Same) {
				continue
			}
			windows = slices.Clip(slices.Clone(first))
			own = make([][]int, len(calls))
			all := make([]int, len(first))
			for p := range all {
				all[p] = p
			}
			for q := range j {
				own[q] = all
			}
			added = map[mwKey]int{}
		}
		m := make([]int, len(ws))
		for p, w := range ws {
			if w.Same(first[p]) {
				m[p] = p
				continue
			}
			i, ok := added[mwKey{w.Key, p}]
			if !ok {
				i = len(windows)
				windows = append(windows, w)
				added[mwKey{w.Key, p}] = i
			}
			m[p] = i
		}
		own[j] = m
	}
	if own == nil {
		return first, nil
	}
	return windows, own
}

// mwKey is a merchant's use of the window at one place of a batch's checks.
type mwKey struct {
	key ratelimit.Key
	at  int
}
