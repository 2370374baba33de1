package witness

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// item is one admission's certain presence in one window: it holds weight
// w there on [start, end) (µs), for every check in its calendar period.
type item struct {
	a          *admission
	w          int64
	start, end int64
}

// check is one admission to hold to one window's limit at its instant.
type check struct {
	a     *admission
	w     int64
	t     int64
	win   Window
	rs    ruleSet
	limit int64
}

// violation found at a check, before grouping.
type overLimit struct {
	ck     check
	use    int64
	room   int64 // the limit plus the excess a fault allows
	active []*admission
}

// checkLimits checks property 3: at each certain admission, every window of
// the rule set that decided it held at most its limit, counting only the
// slots certainly in the window then.
func (c *checker) checkLimits() {
	c.buildGroups()
	for _, k := range c.groupOrder {
		g := c.groups[k]
		if c.policy == "allow" && c.anyRedisFault(k) {
			// Policy allow admits everything while Redis fails: no bound.
			continue
		}
		var found []overLimit
		for _, part := range c.partitions(g) {
			found = append(found, c.sweep(g, part.items, part.checks)...)
		}
		c.reportOverLimits(k, found)
	}
}

type partition struct {
	items  []item
	checks []check
}

// partitions cuts a window's admissions into independent sweeps: one for a
// sliding window, one per period for a calendar window (a slot counts only
// in the period that certainly holds its admission).
func (c *checker) partitions(g *group) []partition {
	id := g.key.id
	parts := map[period]*partition{}
	var order []period
	get := func(p period) *partition {
		if parts[p] == nil {
			parts[p] = &partition{}
			order = append(order, p)
		}
		return parts[p]
	}
	gaps := c.gaps(g.key)
	for _, a := range g.recorded {
		until := a.countUntil
		if id.Amount {
			until = a.amountUntil
		}
		end := until
		if id.Calendar == "" {
			end = min(end, a.lo+id.SpanUs)
		}
		for _, gs := range gaps {
			if gs > a.hi-c.schedSlack {
				end = min(end, max(gs, a.hi+1))
			}
		}
		var p period
		if id.Calendar != "" {
			p = periodFor(id, a.hi)
			if periodFor(id, a.lo) != p {
				continue
			}
		}
		w := int64(1)
		if id.Amount {
			w = a.amount
		}
		if a.certain() {
			end = max(end, a.hi+1) // it held its slot at its own instant
			rs := a.rules[0]
			for _, s := range rs.windowsOf(a.amount, a.currency, a.merchant) {
				if s.key == g.key.key && s.window.ID == id && !s.shadow {
					if s.merchant != "" {
						c.merchantChecks++
					}
					get(p).checks = append(get(p).checks, check{a: a, w: w, t: a.hi, win: s.window, rs: rs, limit: s.window.Limit})
				}
			}
		}
		if end > a.hi {
			get(p).items = append(get(p).items, item{a: a, w: w, start: a.hi, end: end})
		}
	}
	out := make([]partition, 0, len(order))
	for _, p := range order {
		out = append(out, *parts[p])
	}
	return out
}

// gaps are the publication times of documents that have no window with
// this id for the key: a window no rule has any more is forgotten
// (docs/DESIGN.md, "When Redis fails"), so a slot admitted before such a
// document is, conservatively, not counted after it.
func (c *checker) gaps(k groupKey) []int64 {
	var out []int64
	for _, s := range c.spans {
		if !s.doc.hasWindow(k.key, k.id) {
			out = append(out, s.fromUs)
		}
	}
	return out
}

// sweep runs through one partition in time order, keeping the certain use
// of the window (in all and per bizType) at each check.
func (c *checker) sweep(g *group, items []item, checks []check) []overLimit {
	if len(checks) == 0 {
		return nil
	}
	starts := append([]item(nil), items...)
	sort.Slice(starts, func(i, j int) bool { return starts[i].start < starts[j].start })
	ends := append([]item(nil), items...)
	sort.Slice(ends, func(i, j int) bool { return ends[i].end < ends[j].end })
	sort.SliceStable(checks, func(i, j int) bool { return checks[i].t < checks[j].t })

	var use int64
	byBiz := map[string]int64{}
	var out []overLimit
	si, ei := 0, 0
	for ci := 0; ci < len(checks); {
		t := checks[ci].t
		var tie int64
		tieBiz := map[string]int64{}
		for ; si < len(starts) && starts[si].start <= t; si++ {
			use += starts[si].w
			byBiz[starts[si].a.bizType] += starts[si].w
			if starts[si].start == t {
				tie += starts[si].w
				tieBiz[starts[si].a.bizType] += starts[si].w
			}
		}
		for ; ei < len(ends) && ends[ei].end <= t; ei++ {
			use -= ends[ei].w
			byBiz[ends[ei].a.bizType] -= ends[ei].w
		}
		cj := ci
		for cj < len(checks) && checks[cj].t == t {
			cj++
		}
		// Admissions at one instant were decided one after the other in
		// an order the history does not show: take the kindest, the
		// smaller limits first.
		ties := checks[ci:cj]
		sort.SliceStable(ties, func(i, j int) bool {
			if ties[i].limit != ties[j].limit {
				return ties[i].limit < ties[j].limit
			}
			return ties[i].w < ties[j].w
		})
		after := use - tie
		afterBiz := map[string]int64{}
		for b, v := range byBiz {
			afterBiz[b] = v - tieBiz[b]
		}
		for _, ck := range ties {
			after += ck.w
			afterBiz[ck.a.bizType] += ck.w
			need := after
			for name, r := range ck.win.Reserve {
				if name != ck.a.bizType {
					need += max(0, r-afterBiz[name])
				}
			}
			room := ck.limit + c.excess(g.key, ck, t)
			if need > room {
				out = append(out, overLimit{ck: ck, use: need, room: room, active: activeAt(items, t, ck.a)})
			}
		}
		ci = cj
	}
	return out
}

// activeAt lists up to three other slots in the window at t, latest first,
// for an excerpt.
func activeAt(items []item, t int64, self *admission) []*admission {
	var out []*admission
	for i := len(items) - 1; i >= 0 && len(out) < 3; i-- {
		it := items[i]
		if it.a != self && it.start <= t && t < it.end {
			out = append(out, it.a)
		}
	}
	return out
}

// reportOverLimits reports one violation per window and limits version,
// with the first admission over the limit and how many more there were.
func (c *checker) reportOverLimits(k groupKey, found []overLimit) {
	type gk struct{ version string }
	first := map[gk]overLimit{}
	count := map[gk]int{}
	var order []gk
	for _, f := range found {
		key := gk{f.ck.rs.doc.Version}
		if _, ok := first[key]; !ok {
			first[key] = f
			order = append(order, key)
		}
		count[key]++
	}
	for _, key := range order {
		f := first[key]
		msg := fmt.Sprintf("admitted with %d in the window at %d µs, over the limit %d of version %s", f.use, f.ck.t, f.ck.limit, shortVersion(key.version))
		if f.room > f.ck.limit {
			msg += fmt.Sprintf(" and the %d a Redis fault allows", f.room-f.ck.limit)
		}
		if len(f.ck.win.Reserve) > 0 {
			msg += " (counting the other names' unmet reservations)"
		}
		if n := count[key] - 1; n > 0 {
			msg += fmt.Sprintf("; %d more admissions over it", n)
		}
		ex := []string{excerpt(f.ck.a.rec)}
		for _, a := range f.active {
			ex = append(ex, excerpt(a.rec))
		}
		c.report(Violation{Property: WithinLimits, Key: k.key, Window: k.id.String(), RequestID: f.ck.a.member, Message: msg, Excerpt: ex})
	}
}

func shortVersion(v string) string {
	if len(v) > 8 {
		return v[:8]
	}
	return v
}

// channelOf is the channel of a limits key.
func channelOf(key string) string {
	_, ch, _ := strings.Cut(key, ":")
	return ch
}

// anyRedisFault says whether the history marks a Redis fault for the key's
// channel.
func (c *checker) anyRedisFault(k groupKey) bool {
	for _, f := range c.redisFaults {
		if f.Target == "" || f.Target == channelOf(k.key) {
			return true
		}
	}
	return false
}

// excess is what a window may hold beyond its limit at t because of Redis
// faults whose effects reach into it (docs/DESIGN.md, "When Redis fails"):
//
//   - every policy: λ, the writes a fault lost (Fault.LostWrites; when
//     Redis lost its data, the whole window as it stood then: see
//     emptiedWindow);
//   - policy local, on top: the in-process admissions,
//     Σᵢ min(⌊s·L⌋, ⌊s·L₁⌋·Cᵢ) ≤ N·min(⌊L/N⌋, ⌊L₁/N⌋·C), where L₁ is the
//     limit of the key's shortest sliding count window W₁ and C the
//     number of W₁-long intervals that cover the faults (each lengthened
//     by the fault slack); N·⌊L/N⌋ for an amount window or a key without a
//     sliding count window. L is the highest limit the window had in a
//     document in force in its span (see windowHigh), and the in-process
//     admissions come on top of Redis's record, which after a decrease may
//     hold that many; N counts each instance once per incarnation that may
//     have decided in process (see incarnations).
func (c *checker) excess(k groupKey, ck check, t int64) int64 {
	id := k.id
	var lambda, cover int64
	hit := false
	var l1, w1 int64
	var id1 WindowID
	for _, s := range ck.rs.windowsOf(ck.a.amount, ck.a.currency, ck.a.merchant) {
		if s.key == k.key && !s.window.ID.Amount && s.window.ID.Calendar == "" && (w1 == 0 || s.window.ID.SpanUs < w1) {
			l1, w1, id1 = s.window.Limit, s.window.ID.SpanUs, s.window.ID
		}
	}
	var met [][2]int64
	for _, f := range c.redisFaults {
		if f.Target != "" && f.Target != channelOf(k.key) {
			continue
		}
		from, to := f.FromUs-c.skew, f.ToUs+c.faultSlack
		var in bool
		if id.Calendar == "" {
			in = overlaps(from, to, t-id.SpanUs, t)
		} else {
			in = from <= t && periodFor(id, min(to, t)) == periodFor(id, t)
		}
		if !in {
			continue
		}
		hit = true
		met = append(met, [2]int64{from, to})
		switch {
		case f.LostWrites < 0:
			lambda += c.emptiedWindow(k, f, t)
		case id.Amount:
			lambda += f.LostWrites * c.maxAmount
		default:
			lambda += f.LostWrites
		}
		if w1 > 0 {
			cover += (to - from + w1 - 1) / w1
		}
	}
	if !hit || c.policy != "local" {
		return lambda
	}
	// The in-process admissions do not see Redis's record: they come on
	// top of it, and after a decrease it may hold the members admitted
	// under the higher limit (docs/DESIGN.md, "The rules": a change that
	// keeps a window's id keeps its members and applies the new limit to
	// them; "Limits changes": the in-process windows keep what they hold,
	// as Redis does). The in-process shares were cut from the limits then
	// too.
	high := max(ck.limit, c.windowHigh(k.key, id, t))
	if w1 > 0 {
		// The shares were cut from the limits in force during the
		// faults, which a later document may have lowered since.
		l1 = max(l1, c.windowHigh(k.key, id1, t))
		for _, m := range met {
			for _, d := range c.docsIn(m[0], m[1]) {
				l1 = max(l1, d.maxLimit(k.key, id1))
			}
		}
	}
	n := c.instances
	inc := c.incarnations(met)
	local := inc * (high / n)
	if !id.Amount && w1 > 0 {
		local = inc * min(high/n, (l1/n)*cover)
	}
	return lambda + (high - ck.limit) + local
}

// windowHigh is the highest limit the window with this id of the key had
// in a document in force while a member still in it at t may have been
// admitted: in its span before t (a sliding window), or at any time before
// t (a calendar window, conservatively).
func (c *checker) windowHigh(key string, id WindowID, t int64) int64 {
	lo := int64(math.MinInt64 / 2)
	if id.Calendar == "" {
		lo = t - id.SpanUs - c.skew
	}
	var most int64
	for _, d := range c.docsIn(lo, t+c.skew) {
		most = max(most, d.maxLimit(key, id))
	}
	return most
}

// incarnations counts the instance processes that may have decided in
// process during the Redis faults met (each [from, to], lengthened): every
// instance once, and once more for each of its restarts that separates
// two of those periods. A restarted instance starts with empty in-process
// windows, its admissions before the restart forgotten (docs/DESIGN.md,
// "When Redis fails", known imprecision: "a fresh instance has no history,
// so up to a whole share"; docs/RELIABILITY.md, known gaps: "freshly
// started instances have no history"), so each process it ran as may
// admit its share. Every instance fault (a kill, a stop, a graceful
// restart) counts as a restart at its start.
func (c *checker) incarnations(met [][2]int64) int64 {
	kills := map[string][]int64{}
	for _, f := range c.h.Faults {
		if f.Kind == "instance" && f.Target != "" {
			kills[f.Target] = append(kills[f.Target], f.FromUs)
		}
	}
	extra := int64(0)
	for _, at := range kills {
		// index(x) is the incarnation running at x: the restarts begun by x.
		index := func(x int64) int {
			n := 0
			for _, k := range at {
				if k <= x {
					n++
				}
			}
			return n
		}
		seen := map[int]bool{}
		for _, m := range met {
			for i := index(m[0]); i <= index(m[1]); i++ {
				seen[i] = true
			}
		}
		if len(seen) > 1 {
			extra += int64(len(seen) - 1)
		}
	}
	return c.instances + extra
}

// emptiedWindow bounds what a Redis restart that lost its data (Fault.
// LostWrites < 0) took from the window k, as seen from a check at t: the
// members Redis held when it came back empty that would still count at t.
// Each of them was admitted under the limit of the document in force for
// its admission (docs/DESIGN.md, "The rules": a window spanning a change
// is held, at each admission, to the limit in force for that admission),
// so together they are at most the highest limit this window had in a
// document in force while they were admitted: from a span before the
// fault (a sliding window; the whole history before it for a calendar
// window) to its end. Not the limit at t: after a decrease the lost
// members may number more than the new limit, and Redis, emptied, admits
// the new limit again on top of them (docs/DESIGN.md, "Writes lost with a
// killed master (λ)": Redis's record exceeds a window's limit by the
// writes lost in it).
func (c *checker) emptiedWindow(k groupKey, f Fault, t int64) int64 {
	lo := int64(math.MinInt64 / 2)
	if k.id.Calendar == "" {
		lo = f.FromUs - c.skew - k.id.SpanUs
	}
	hi := min(f.ToUs, t) + c.skew
	var most int64
	for _, d := range c.docsIn(lo, hi) {
		most = max(most, d.maxLimit(k.key, k.id))
	}
	return most
}
