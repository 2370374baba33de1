package ratelimit

import (
	"context"
	"slices"
	"sync"
	"time"

	"payserver/internal/batch"
)

// defaultMaxBatch bounds one coalesced call when RedisStoreOptions.MaxBatch
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
// decided (nearCache.remember).
type coalescer struct {
	s   *RedisStore
	max int
	// keys maps each key checked to its *batch.Batcher. Only keys with
	// limits reach the store, so this is bounded by the limits documents.
	keys sync.Map
}

type checkArg struct {
	windows []KeyWindow
	member  checkMember
}

type keyBatcher = batch.Batcher[checkArg, StoreResult]

func newCoalescer(s *RedisStore, maxBatch int) *coalescer {
	if maxBatch <= 0 {
		maxBatch = defaultMaxBatch
	}
	return &coalescer{s: s, max: maxBatch}
}

// check decides one check: at once if no call of its key is in flight,
// else with the next batch of the key. A queued caller that
// leaves on ctx may still be decided (and, if admitted, recorded) by a call
// already on its way, as with a plain client whose reply came too late.
func (c *coalescer) check(ctx context.Context, windows []KeyWindow, member string, amount int64) (StoreResult, error) {
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
		// One call serves one set of windows.
		Fit: func(calls []*batch.Call[checkArg, StoreResult]) int {
			for i, call := range calls {
				if !slices.EqualFunc(call.Arg.windows, calls[0].Arg.windows, KeyWindow.same) {
					return i
				}
			}
			return len(calls)
		},
		One: func(ctx context.Context, a checkArg) (StoreResult, error) {
			return c.s.checkOne(ctx, a.windows, a.member.id, a.member.amount)
		},
		Many: func(ctx context.Context, calls []*batch.Call[checkArg, StoreResult]) {
			windows := calls[0].Arg.windows
			members := make([]checkMember, len(calls))
			for i, call := range calls {
				members[i] = call.Arg.member
			}
			res, err := c.s.runCheck(ctx, windows, c.s.checkKeys(windows, members...), checkArgs(windows, members...))
			out := make([]StoreResult, len(calls))
			if err == nil {
				err = parseCheckReply(res, len(windows), out)
			}
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
