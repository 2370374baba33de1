package repo

import (
	"context"

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
// Lanes open only under load: a call takes the first lane (in order) whose
// queue is shorter than spillAt, so while one statement of a kind keeps up,
// every call uses lane 0 and batches are as large as with one lane (each
// statement more costs the database CPU: measured, spreading calls over
// idle lanes at once made batches 2.5 times smaller and a payment 1.4 times
// dearer in server CPU). A queue of spillAt calls behind a statement in
// flight spills into the next lane, which sends at once. When every queue
// is that long, a call joins the shortest. An uncontended call still goes
// out at once, alone. Callers that pick a lane at the same instant may
// overfill its queue a little; that only makes its next batch larger. Lanes share nothing but the connection pool, so
// what one batch guarantees (see orders_batch.go) holds per lane; between
// lanes the database orders statements as it orders any concurrent
// statements: of two claims of one requestId in different lanes, the unique
// index lets exactly one commit, and the other's batch is refused and
// retried row by row.
type lanes[A, R any] struct {
	b []*batch.Batcher[A, R]
}

// newLanes returns n lanes (at least one), each a batcher built by mk.
func newLanes[A, R any](n int, mk func() *batch.Batcher[A, R]) *lanes[A, R] {
	n = max(n, 1)
	l := &lanes[A, R]{b: make([]*batch.Batcher[A, R], n)}
	for i := range l.b {
		l.b[i] = mk()
	}
	return l
}

// Do serves one call on the lane pick chooses.
func (l *lanes[A, R]) Do(ctx context.Context, a A) (R, error) {
	return l.b[l.pick()].Do(ctx, a)
}

// spillAt is the queue length (calls waiting behind a lane's statement in
// flight) from which the next call goes to the next lane: 16 is the INSERT
// batch size of the measurement in docs/PERFORMANCE.md ("Batches in
// flight").
const spillAt = 16

// pick returns the first lane whose queue is shorter than spillAt, or else
// the one with the shortest queue.
func (l *lanes[A, R]) pick() int {
	best, bestQueued := 0, -1
	for i, b := range l.b {
		n := b.Queued()
		if n < spillAt {
			return i
		}
		if bestQueued < 0 || n < bestQueued {
			best, bestQueued = i, n
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
