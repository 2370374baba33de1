package ratelimit

// localEntry is one member of a window, its admission time, in
// microseconds (Model's unit), its weight (1, or its amount in an amount
// window) and the amount of the request it was admitted for (its identity,
// with the member).
type localEntry struct {
	member string
	at     int64
	weight int64
	amount int64
}

// heldMember is what a queue knows of one member: how many entries it has,
// the amount it was admitted for and the time of its first entry (µs).
type heldMember struct {
	n      int32
	amount int64
	at     int64
}

// queue is a time-ordered list of entries in a ring buffer (a power of two
// long, grown by doubling), so that a queue that keeps about the same length
// moves and allocates nothing.
type queue struct {
	buf  []localEntry
	head int // index in buf of the oldest entry
	n    int
	sum  int64 // the entries' weights
	// idx counts the entries of each member, with its amount, so that has
	// and remove do not walk the queue: windows can hold up to their limit
	// in entries.
	idx map[string]heldMember
}

func (q *queue) len() int { return q.n }

// get returns the i-th oldest entry.
func (q *queue) get(i int) localEntry { return q.buf[(q.head+i)&(len(q.buf)-1)] }

// unindex forgets one entry of member in idx.
func (q *queue) unindex(member string) {
	if h := q.idx[member]; h.n > 1 {
		h.n--
		q.idx[member] = h
	} else {
		delete(q.idx, member)
	}
}

// drop forgets the k oldest entries.
func (q *queue) drop(k int) {
	for i := 0; i < k; i++ {
		j := (q.head + i) & (len(q.buf) - 1)
		q.unindex(q.buf[j].member)
		q.sum -= q.buf[j].weight
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
// microseconds; the later stamp is the safe one: the entry leaves later).
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
	q.sum += e.weight
	if q.idx == nil {
		q.idx = map[string]heldMember{}
	}
	h := q.idx[e.member]
	if h.n == 0 {
		h.at = e.at
	}
	h.n++
	h.amount = e.amount
	q.idx[e.member] = h
}

func (q *queue) has(member string) bool { return q.idx[member].n > 0 }

// amountOf returns the amount member was admitted for, and whether the queue
// holds it.
func (q *queue) amountOf(member string) (int64, bool) {
	h, ok := q.idx[member]
	return h.amount, ok && h.n > 0
}

// atOf returns the time (µs) member was first recorded at, and whether the
// queue holds it.
func (q *queue) atOf(member string) (int64, bool) {
	h, ok := q.idx[member]
	return h.at, ok && h.n > 0
}

// remove deletes every entry of member.
func (q *queue) remove(member string) {
	if q.idx[member].n == 0 {
		return
	}
	delete(q.idx, member)
	kept := 0
	for i := 0; i < q.n; i++ {
		if e := q.get(i); e.member != member {
			q.buf[(q.head+kept)&(len(q.buf)-1)] = e
			kept++
		} else {
			q.sum -= e.weight
		}
	}
	for i := kept; i < q.n; i++ {
		q.buf[(q.head+i)&(len(q.buf)-1)] = localEntry{}
	}
	q.n = kept
}
