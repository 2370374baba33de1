package witness

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// heldKey names one member of one window in Redis.
type heldKey struct {
	channel, bizType string
	id               WindowID
	member           string
}

// memberIndex is every window member of the dump, by window and member.
func (c *checker) memberIndex() map[heldKey]*Member {
	out := map[heldKey]*Member{}
	for i := range c.h.Members {
		m := &c.h.Members[i]
		if rw, ok := parseRedisKey(m.Key); ok {
			bizType, _, _ := strings.Cut(rw.key(), ":")
			out[heldKey{rw.channel, bizType, rw.id, m.Member}] = m
		}
	}
	return out
}

// checkHeld checks slot-held (docs/DESIGN.md "A slot's fate": a slot
// whose fate is to stay counted is never given back): every admission
// whose fate keeps it counted has its member in each of its windows that is
// still live at the dump. Kept: a SUCCEEDED or UNKNOWN order's slot in
// every window, a FAILED order's (the channel declined the call) in its
// count windows, an acquisition's when no release of it was sent and no
// later acquire of it lost its answer. Only the windows it was admitted
// into under every rule set that may have decided it are checked (a
// group's recorded admissions), and not when a Redis fault may have kept
// the write from Redis or lost it afterwards.
func (c *checker) checkHeld() {
	dump := c.h.Config.DumpedAtUs
	members := c.memberIndex()
	for _, k := range c.groupOrder {
		g := c.groups[k]
		bizType, channel, _ := strings.Cut(k.key, ":")
		for _, a := range g.recorded {
			why := c.keptBecause(a, k.id)
			if why == "" || !c.liveAt(k.id, a, dump) || c.redisMayHaveLost(a, channel) {
				continue
			}
			if members[heldKey{channel, bizType, k.id, a.member}] != nil {
				continue
			}
			c.report(Violation{Property: SlotHeld, Key: k.key, Window: k.id.String(), RequestID: a.member,
				Message: fmt.Sprintf("%s, its window is live at the dump, and Redis holds no member %s in it", why, a.member),
				Excerpt: []string{excerpt(a.rec)}})
		}
	}
}

// keptBecause says why an admission's slot stays counted in a window of
// id; "" when its fate lets it go (or is not known).
func (c *checker) keptBecause(a *admission, id WindowID) string {
	switch {
	case a.rec.Order != nil:
		o := a.rec.Order
		switch {
		case o.Status == "SUCCEEDED" || o.Status == "UNKNOWN":
			return "the order is " + o.Status
		case o.Status == "FAILED" && !isNotSent(o) && !id.Amount:
			return "the channel declined the call (FAILED " + o.FailureCode + "), which stays counted"
		}
	case a.rec.Op != nil && a.rec.Op.Kind == "acquire":
		if a.countUntil == forever && !c.laterLostAcquire(a.rec.Op) {
			return "acquired (200) and no release of it was sent"
		}
	}
	return ""
}

// laterLostAcquire says whether op's requestId was acquired again on its
// key after it with the answer lost (503 or none): the limits API releases
// a lost answer's slot within a minute unless the requestId is acquired
// again, and that slot is op's own.
func (c *checker) laterLostAcquire(op *Op) bool {
	for _, later := range c.opsByReq[op.RequestID] {
		if later != op && later.Kind == "acquire" && later.InvokeUs >= op.InvokeUs && later.Channel == op.Channel &&
			later.BizType == op.BizType && (later.Status == 0 || later.Status == 503) {
			return true
		}
	}
	return false
}

// liveAt says whether the admission is certainly in a window of id at
// instant t: admitted before t, and after t less the size or in t's period.
func (c *checker) liveAt(id WindowID, a *admission, t int64) bool {
	if a.hi+c.skew >= t {
		return false
	}
	if id.Calendar == "" {
		return a.lo-c.skew > t-id.SpanUs
	}
	p := periodFor(id, t-c.skew)
	return periodFor(id, a.lo-c.skew) == p && periodFor(id, a.hi+c.skew) == p && periodFor(id, t+c.skew) == p
}

// redisMayHaveLost says whether a Redis fault may explain a missing
// member: one during the admission (lengthened by the fault slack, an
// admission then may have been made in process only), or one after it
// that lost writes.
func (c *checker) redisMayHaveLost(a *admission, channel string) bool {
	for _, f := range c.redisFaults {
		if f.Target != "" && f.Target != channel {
			continue
		}
		if overlaps(a.lo, a.hi, f.FromUs-c.skew-c.faultSlack, f.ToUs+c.faultSlack) {
			return true
		}
		if f.LostWrites != 0 && f.ToUs+c.skew >= a.lo {
			return true
		}
	}
	return false
}

// refusedOnly says whether every operation of rid that could take a slot
// under member answered 429, and there was one: a payment with no order
// whose every POST /pay was refused, or an acquisition whose every acquire
// was.
func (c *checker) refusedOnly(member string) bool {
	kind, rid := "pay", member
	if strings.HasPrefix(member, acquisitionPrefix) {
		kind, rid = "acquire", strings.TrimPrefix(member, acquisitionPrefix)
	} else if c.ordersByReq[rid] != nil {
		return false
	}
	n := 0
	for _, op := range c.opsByReq[rid] {
		if op.Kind != kind {
			continue
		}
		if op.Status != 429 {
			return false
		}
		n++
	}
	return n > 0
}

// checkIdentity checks identity (docs/OPERATIONS.md, the limits API: "A
// requestId's identity is its requestId and its amount: acquiring a
// requestId that holds a slot for another amount is 409
// IDEMPOTENCY_CONFLICT, never a duplicate at the old amount"): an acquire
// answered 200 as a duplicate repeats an acquisition of its own amount,
// the latest acquire of that requestId on that key answered 200 as new and
// not released before it was sent.
func (c *checker) checkIdentity() {
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		if op.Kind != "acquire" || op.Status != 200 || !isDuplicate(op) {
			continue
		}
		// The acquisition it repeats: the latest admitted as new before
		// its answer (a concurrent one may have been sent after it), with
		// no release sent in between.
		var held *Op
		var live []*Op // every acquisition admitted as new since the last release
		for _, prev := range c.opsByReq[op.RequestID] {
			if prev == op || prev.InvokeUs > completeOr(op, 0) || prev.Channel != op.Channel || prev.BizType != op.BizType {
				continue
			}
			switch {
			case prev.Kind == "acquire" && prev.Status == 200 && !isDuplicate(prev):
				held = prev
				live = append(live, prev)
			case prev.Kind == "release" && held != nil && prev.InvokeUs < op.InvokeUs:
				held, live = nil, nil
			}
		}
		if held == nil || held.Amount == op.Amount || c.heldInProcess(op, live) || c.heldUnderAnotherDocument(op, held, live) {
			continue
		}
		c.report(Violation{Property: Identity, Key: op.BizType + ":" + op.Channel, RequestID: op.RequestID,
			Message: fmt.Sprintf("acquire for %d %s answered 200 duplicate of a slot acquired for %d %s (want 409 IDEMPOTENCY_CONFLICT)",
				op.Amount, op.Currency, held.Amount, held.Currency),
			Excerpt: []string{excerpt(Record{Op: held}), excerpt(Record{Op: op})}})
	}
}

// isDuplicate says whether an acquire's 200 says duplicate.
func isDuplicate(op *Op) bool {
	var body struct {
		Duplicate bool `json:"duplicate"`
	}
	_ = json.Unmarshal(op.Body, &body)
	return body.Duplicate
}

// heldInProcess says whether the duplicate op may repeat an acquisition of
// its own amount that its instance decided in process (policy local, both
// during a Redis fault lengthened by the fault slack), other than the
// latest. An instance deciding in process keeps its own windows and cannot
// know what the others admit (docs/DESIGN.md, "When Redis fails": "the
// same windows in process"; "Policy `local` cannot be exact across a
// failover": "an instance that admits in process cannot know what the
// others admit"): two concurrent acquires of one requestId at two amounts
// on two instances are both admitted, each held at its own amount in its
// own instance's window, and a retry on one of them at its amount is a
// duplicate there. Never on Redis, where the rule is exact: the duplicate
// must be in process too, on the instance that holds that amount.
func (c *checker) heldInProcess(op *Op, live []*Op) bool {
	if c.policy != "local" || !c.inRedisFault(op.Channel, op.InvokeUs, completeOr(op, forever)) {
		return false
	}
	for _, prev := range live {
		if prev.Amount == op.Amount && prev.Currency == op.Currency && prev.Instance == op.Instance &&
			c.inRedisFault(prev.Channel, prev.InvokeUs, completeOr(prev, forever)) {
			return true
		}
	}
	return false
}

// heldUnderAnotherDocument says whether the duplicate op may repeat an
// acquisition of its own amount that was checked in other windows than
// held's, the latest: a limits document reaches the instances one by one,
// each within a second (docs/OPERATIONS.md, "Changing a channel limit"),
// and while it does, two instances may check one key under two documents.
// When no window is the same in both (a calendar's zone or cutoff names
// another period's key), two acquires of one requestId at two amounts are
// both admitted, each in its own document's windows, and a retry at one
// amount in its windows is a duplicate there. So op is excused when, under
// some rules it may have been checked by, it shares a window with an
// acquisition of its amount and none with held under some rules held may
// have been checked by. When a window is the same in both, it holds both
// acquires' member, and the second must have been refused 409; a retry
// checked only under held's windows must be too.
func (c *checker) heldUnderAnotherDocument(op, held *Op, live []*Op) bool {
	heldWindows := c.windowsOfAcquire(held)
	for _, mine := range c.windowsOfAcquire(op) {
		if !slices.ContainsFunc(heldWindows, func(h []scoped) bool { return !shareAWindow(mine, h) }) {
			continue // under these rules, op's windows hold held's member
		}
		for _, prev := range live {
			if prev.Amount == op.Amount && prev.Currency == op.Currency &&
				slices.ContainsFunc(c.windowsOfAcquire(prev), func(p []scoped) bool { return shareAWindow(mine, p) }) {
				return true
			}
		}
	}
	return false
}

// windowsOfAcquire lists, for each rule set that may have checked the
// acquire op (at its admission time, or between its invocation and its
// answer widened by the clock skew, under every document then in force),
// the windows that counted it.
func (c *checker) windowsOfAcquire(op *Op) [][]scoped {
	lo, hi := op.InvokeUs-c.skew, completeOr(op, c.grace)+c.skew
	if op.AdmittedAtUs != 0 {
		lo, hi = op.AdmittedAtUs, op.AdmittedAtUs
	}
	var out [][]scoped
	for _, r := range c.rulesFor(op.BizType, op.Channel, c.docsIn(lo, hi), lo, hi) {
		out = append(out, r.windowsFor(op.Amount, op.Currency))
	}
	return out
}

// shareAWindow says whether a and b have a window of the same key in
// common.
func shareAWindow(a, b []scoped) bool {
	for _, x := range a {
		for _, y := range b {
			if x.key == y.key && x.window.ID == y.window.ID {
				return true
			}
		}
	}
	return false
}

// inRedisFault says whether [lo, hi] meets a Redis fault of the channel,
// lengthened by the fault slack: a limiter check then may have been decided
// in process.
func (c *checker) inRedisFault(channel string, lo, hi int64) bool {
	for _, f := range c.redisFaults {
		if f.Target != "" && f.Target != channel {
			continue
		}
		if overlaps(lo, hi, f.FromUs-c.skew, f.ToUs+c.faultSlack) {
			return true
		}
	}
	return false
}
