package ratelimit

// localEntry is one member of a window, its admission time, in
// microseconds (Model's unit), and its weight (1, or its amount in an amount
// window).
type localEntry struct {
	member string
	at     int64
	weight int64
}

// queue is a time-ordered list of entries in a ring buffer (a power of two
// long, grown by doubling), so that a queue that keeps about the same length
// moves and allocates nothing.
type queue struct {
	buf  []localEntry
	head int // index in buf of the oldest entry
	n    int
	sum  int64 // the entries' weights
	// idx counts the entries of each member, so that has and remove do not
	// walk the queue: windows can hold up to their limit in entries.
	idx map[string]int32
}

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
		} else {
			q.sum -= e.weight
		}
	}
	for i := kept; i < q.n; i++ {
		q.buf[(q.head+i)&(len(q.buf)-1)] = localEntry{}
	}
	q.n = kept
}
