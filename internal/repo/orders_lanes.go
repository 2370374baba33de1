package repo

import (
	"context"
	"sync/atomic"

	"payserver/internal/batch"
)

// lanes spreads the calls of one kind over several batchers, so that up to
// one statement per lane is in flight at once. With durable commits every
// statement waits for its fsync (and, with the binary log, for the binlog's);
// a single lane caps an instance at one batch per fsync round however deep
// the queue behind it is, while several statements in flight let MariaDB's
// own group commit merge their fsyncs (docs/PERFORMANCE.md, "Batches in
// flight").
//
// A call goes to an idle lane if there is one, and is then sent at once,
// alone, as with one lane: an uncontended call still waits for nothing.
// Otherwise it joins the lane with the fewest callers. Two callers may pick
// the same idle lane at once; the second then queues behind the first, as
// it would with one lane. Lanes share nothing but the connection pool, so
// what one batch guarantees (see orders_batch.go) holds per lane; between
// lanes the database orders statements as it orders any concurrent
// statements: of two claims of one requestId in different lanes, the unique
// index lets exactly one commit, and the other's batch is refused and
// retried row by row.
type lanes[A, R any] struct {
	b    []*batch.Batcher[A, R]
	load []atomic.Int64 // callers inside Do, per lane
}

// newLanes returns n lanes (at least one), each a batcher built by mk.
func newLanes[A, R any](n int, mk func() *batch.Batcher[A, R]) *lanes[A, R] {
	n = max(n, 1)
	l := &lanes[A, R]{b: make([]*batch.Batcher[A, R], n), load: make([]atomic.Int64, n)}
	for i := range l.b {
		l.b[i] = mk()
	}
	return l
}

// Do serves one call on the lane pick chooses.
func (l *lanes[A, R]) Do(ctx context.Context, a A) (R, error) {
	i := l.pick()
	l.load[i].Add(1)
	defer l.load[i].Add(-1)
	return l.b[i].Do(ctx, a)
}

// pick returns the first idle lane, or else the one with the fewest callers.
func (l *lanes[A, R]) pick() int {
	best, bestLoad := 0, l.load[0].Load()
	for i := 1; i < len(l.load) && bestLoad > 0; i++ {
		if n := l.load[i].Load(); n < bestLoad {
			best, bestLoad = i, n
		}
	}
	return best
}

// Stats sums the lanes' counts.
func (l *lanes[A, R]) Stats() batch.Stats {
	var out batch.Stats
	for _, b := range l.b {
		st := b.Stats()
		out.Calls += st.Calls
		out.Batches += st.Batches
		out.Batched += st.Batched
		out.Retried += st.Retried
		out.Canceled += st.Canceled
	}
	return out
}

// Queued is the number of calls waiting in every lane.
func (l *lanes[A, R]) Queued() int {
	n := 0
	for _, b := range l.b {
		n += b.Queued()
	}
	return n
}

// setFlushHook sets every lane's FlushHook (tests).
func (l *lanes[A, R]) setFlushHook(f func(n int)) {
	for _, b := range l.b {
		b.FlushHook = f
	}
}

// AddRetried counts n calls that a batch served one by one. Stats sums the
// lanes, so the lane it is counted on does not matter.
func (l *lanes[A, R]) AddRetried(n int) { l.b[0].AddRetried(n) }
