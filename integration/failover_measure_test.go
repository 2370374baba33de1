package integration

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// loadSample is one request of the failover load.
type loadSample struct {
	id        string
	inst      int
	status    int
	code      string // the error code of a non-2xx answer
	sent, end time.Time
}

// countedWindow is one sliding window and how many admissions it holds.
type countedWindow struct {
	at time.Time // the window is [at, at+width)
	n  int
}

// maxCount is how many the fullest of ws holds.
func maxCount(ws []countedWindow) int { return maxWindow(ws).n }

// maxWindow is the fullest of ws (the earliest of equals).
func maxWindow(ws []countedWindow) countedWindow {
	var m countedWindow
	for _, w := range ws {
		if w.n > m.n {
			m = w
		}
	}
	return m
}

// windowCounts returns the windows [x, x+width) that start at each instant
// of ts (sorted), with how many of ts each holds. The fullest window of any
// start is among them.
func windowCounts(ts []time.Time, width time.Duration) []countedWindow {
	out := make([]countedWindow, len(ts))
	j := 0
	for i, x := range ts {
		for j < len(ts) && ts[j].Before(x.Add(width)) {
			j++
		}
		out[i] = countedWindow{x, j - i}
	}
	return out
}

// containedCounts is windowCounts for admissions known only to lie in
// [sent, end]: a window [x, x+width) counts the samples with x <= sent and
// end < x+width, each certainly admitted inside it. The fullest such window
// starts at some sample's sent time, so only those are tried.
func containedCounts(samples []loadSample, width time.Duration) []countedWindow {
	bySent := append([]loadSample(nil), samples...)
	sort.Slice(bySent, func(i, j int) bool { return bySent[i].sent.Before(bySent[j].sent) })
	out := make([]countedWindow, len(bySent))
	for i, s := range bySent {
		y := s.sent.Add(width)
		k := 0
		for _, o := range bySent[i:] {
			if !o.sent.Before(y) {
				break
			}
			if o.end.Before(y) {
				k++
			}
		}
		out[i] = countedWindow{s.sent, k}
	}
	return out
}

// localSpan is a stretch (from, to] in which one instance admitted n
// requests in process (policy local), read from its metrics. The admissions
// have no Redis timestamp; they happened somewhere in the span.
type localSpan struct {
	inst     int
	from, to time.Time
	n        int
}

// withLocal returns, for each window of ws, its count plus the in-process
// admissions of every span that overlaps it: an upper bound of the
// admissions made in the window when ws counts the Redis ones. The fullest
// window of Redis + in-process admissions may also start at a span's start,
// so those starts are tried too.
func withLocal(redisTimes []time.Time, spans []localSpan, width time.Duration) []countedWindow {
	starts := append([]time.Time(nil), redisTimes...)
	for _, sp := range spans {
		starts = append(starts, sp.from, sp.to.Add(-width))
	}
	out := make([]countedWindow, 0, len(starts))
	for _, x := range starts {
		y := x.Add(width)
		lo := sort.Search(len(redisTimes), func(i int) bool { return !redisTimes[i].Before(x) })
		hi := sort.Search(len(redisTimes), func(i int) bool { return !redisTimes[i].Before(y) })
		n := hi - lo
		for _, sp := range spans {
			if sp.to.After(x) && sp.from.Before(y) {
				n += sp.n
			}
		}
		out = append(out, countedWindow{x, n})
	}
	return out
}

// coverSeconds returns how many 1 s intervals, laid greedily from the start
// of each uncovered span, cover the spans of one instance: the in-process
// windows let an instance admit at most its share of the 1 s limit in each.
func coverSeconds(spans []localSpan) int {
	sort.Slice(spans, func(i, j int) bool { return spans[i].from.Before(spans[j].from) })
	k := 0
	var coveredTo time.Time
	for _, sp := range spans {
		for sp.to.After(coveredTo) {
			start := sp.from
			if coveredTo.After(start) {
				start = coveredTo
			}
			coveredTo = start.Add(time.Second)
			k++
		}
	}
	return k
}

// redisRecord collects every member Redis ever showed in a key's longest
// window (each admission is recorded in every window of the key, and the
// longest keeps it longest), with its score, the Redis time of the
// admission. Members seen once and gone later while still inside the window
// were lost (writes the killed master had not replicated).
type redisRecord struct {
	mu     sync.Mutex
	cc     *redis.ClusterClient
	key    string
	seen   map[string]time.Time
	last   map[string]bool // members of the last successful read
	reads  int
	failed int
}

func newRedisRecord(addrs []string, key string) *redisRecord {
	return &redisRecord{
		cc: redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: 200 * time.Millisecond,
			ReadTimeout: 300 * time.Millisecond, MaxRetries: -1, ClusterStateReloadInterval: 500 * time.Millisecond}),
		key: key, seen: map[string]time.Time{},
	}
}

// read reads the whole window once and adds what it holds.
func (r *redisRecord) read() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	zs, err := r.cc.ZRangeWithScores(ctx, r.key, 0, -1).Result()
	if err != nil {
		r.cc.ReloadState(ctx)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.failed++
		return
	}
	r.reads++
	r.last = make(map[string]bool, len(zs))
	for _, z := range zs {
		if m, ok := z.Member.(string); ok {
			r.seen[m] = time.UnixMicro(int64(z.Score))
			r.last[m] = true
		}
	}
}

// lost returns the members seen before but missing from the last read.
func (r *redisRecord) lost() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for m := range r.seen {
		if !r.last[m] {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// times returns the admission times of the members for which keep is true,
// sorted.
func (r *redisRecord) times(keep func(member string) bool) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]time.Time, 0, len(r.seen))
	for m, at := range r.seen {
		if keep(m) {
			out = append(out, at)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

func (r *redisRecord) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%d members read back from Redis in %d reads (%d failed)", len(r.seen), r.reads, r.failed)
}

func (r *redisRecord) close() { _ = r.cc.Close() }
