package witness

import (
	"encoding/json"
	"sort"
	"strings"
)

// possibleIndex is one window's possible slots sorted by the latest time
// each may have been admitted, with prefix sums of their weights: an upper
// bound of the window's use over an interval is one range of it.
type possibleIndex struct {
	id      WindowID
	entries []*admission
	his     []int64
	cum     []int64 // cum[i] is the weight of entries[:i]
	wide    []*admission
}

func newPossibleIndex(g *group) *possibleIndex {
	x := &possibleIndex{id: g.key.id, entries: append([]*admission(nil), g.possible...)}
	sort.SliceStable(x.entries, func(i, j int) bool { return x.entries[i].hi < x.entries[j].hi })
	x.cum = make([]int64, len(x.entries)+1)
	for i, a := range x.entries {
		x.his = append(x.his, a.hi)
		x.cum[i+1] = x.cum[i] + x.weight(a)
		if a.lo != a.hi {
			x.wide = append(x.wide, a)
		}
	}
	return x
}

func (x *possibleIndex) weight(a *admission) int64 {
	if x.id.Amount {
		return a.amount
	}
	return 1
}

// spanStart is the index of the first entry that may be in the window's
// span at instant t: admitted after t less the size, or in t's period.
func (x *possibleIndex) spanStart(t int64) int {
	if x.id.Calendar == "" {
		return sort.Search(len(x.his), func(i int) bool { return x.his[i] > t-x.id.SpanUs })
	}
	p := periodFor(x.id, t)
	return sort.Search(len(x.his), func(i int) bool { return periodFor(x.id, x.his[i]) >= p })
}

// upTo is the index after the last entry admitted at or before t.
func (x *possibleIndex) upTo(t int64) int {
	return sort.Search(len(x.his), func(i int) bool { return x.his[i] > t })
}

// maxUse bounds from above the window's use at any instant of [from, to],
// in all and for each of names, leaving out member (a refused request is
// recorded nowhere). A slot may be in the window if its admission may have
// been in the window's span of some instant of [from, to]; releases are
// not subtracted.
func (x *possibleIndex) maxUse(from, to int64, member string, names map[string]int64) (int64, map[string]int64) {
	i0, i1 := x.spanStart(from), max(x.spanStart(from), x.upTo(to))
	use := x.cum[i1] - x.cum[i0]
	byName := map[string]int64{}
	count := func(a *admission) {
		if a.member == member {
			use -= x.weight(a)
			return
		}
		if _, ok := names[a.bizType]; ok {
			byName[a.bizType] += x.weight(a)
		}
	}
	for _, a := range x.entries[i0:i1] {
		count(a)
	}
	for _, a := range x.wide {
		if a.hi > to && a.lo <= to {
			use += x.weight(a)
			count(a)
		}
	}
	return use, byName
}

// admittedDuring is the weight of the entries admitted in [lo, hi] that
// may be in the window's span at instant t.
func (x *possibleIndex) admittedDuring(lo, hi, t int64) int64 {
	i0 := max(x.spanStart(t), sort.Search(len(x.his), func(i int) bool { return x.his[i] >= lo }))
	i1 := max(i0, x.upTo(hi))
	return x.cum[i1] - x.cum[i0]
}

// limitedBody is the part of a 429 REQUEST_LIMITED body the witness reads.
type limitedBody struct {
	Code    string `json:"code"`
	Details struct {
		Reason  string `json:"reason"`
		Channel string `json:"channel"`
		Closed  bool   `json:"closed"`
		// Scope is "merchant" when the merchant's own limit refused.
		Scope      string `json:"scope"`
		Candidates []struct {
			Channel string `json:"channel"`
			Reason  string `json:"reason"`
		} `json:"candidates"`
	} `json:"details"`
}

// checkRefusals checks property 5: every 429 had a full window (or the
// channel's THROTTLED), every 503 came while a fault was marked.
func (c *checker) checkRefusals() {
	index := map[groupKey]*possibleIndex{}
	for k, g := range c.groups {
		index[k] = newPossibleIndex(g)
	}
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		switch op.Status {
		case 429:
			c.checkLimited(op, index)
		case 503:
			if !c.duringFault(op) && !c.limiterPastDeadline(op) {
				c.report(Violation{Property: NoFalseRefusal, RequestID: op.RequestID,
					Message: "503 while the history marks no fault", Excerpt: []string{excerpt(Record{Op: op})}})
			}
		}
	}
}

// limiterPastDeadline says whether a 503 is the limiter's store's (details
// dependency redis) and its request lasted at least the limiter's deadline
// (Options.LimiterTimeout): a check past its deadline is decided by the
// policy on a loaded host too (docs/PERFORMANCE.md,
// PAYSERVER_LIMITER_TIMEOUT), with no fault marked; one answered sooner
// passed no deadline.
func (c *checker) limiterPastDeadline(op *Op) bool {
	if op.CompleteUs == 0 || op.CompleteUs-op.InvokeUs < c.limiterTimeout {
		return false
	}
	var b struct {
		Details struct {
			Dependency string `json:"dependency"`
		} `json:"details"`
	}
	return json.Unmarshal(op.Body, &b) == nil && b.Details.Dependency == "redis"
}

func (c *checker) duringFault(op *Op) bool {
	for _, f := range c.h.Faults {
		if overlaps(op.InvokeUs, completeOr(op, 0), f.FromUs-c.skew, f.ToUs+c.faultSlack) {
			return true
		}
	}
	return false
}

func (c *checker) checkLimited(op *Op, index map[groupKey]*possibleIndex) {
	var body limitedBody
	rec := func() string { return excerpt(Record{Op: op}) }
	if err := json.Unmarshal(op.Body, &body); err != nil || body.Code != "REQUEST_LIMITED" {
		c.report(Violation{Property: HistoryError, RequestID: op.RequestID, Message: "a 429 whose body is not REQUEST_LIMITED", Excerpt: []string{rec()}})
		return
	}
	if body.Details.Reason == "channelThrottled" {
		for _, e := range c.ledgerByReq[op.RequestID] {
			if e.Op == "pay" && e.Outcome == "THROTTLED" && e.ReceivedAtUs <= completeOr(op, 0)+c.skew {
				return
			}
		}
		c.report(Violation{Property: NoFalseRefusal, RequestID: op.RequestID,
			Message: "429 channelThrottled, but the channel's ledger has no THROTTLED pay for this requestId", Excerpt: []string{rec()}})
		return
	}
	member := op.RequestID
	if op.Kind == "acquire" {
		member = acquisitionPrefix + op.RequestID
	}
	channels := []string{op.Channel}
	if op.Channel == "" && op.Kind == "pay" {
		channels = nil
		for _, cand := range body.Details.Candidates {
			if cand.Reason != "unhealthy" {
				channels = append(channels, cand.Channel)
			}
		}
	}
	// A refusal that names the merchant's own limit is justified by the
	// merchant's use alone: a full window of the key does not make the
	// merchant's limit refuse.
	merchantOnly := body.Details.Scope == "merchant" && op.Channel != ""
	for _, ch := range channels {
		if c.refusalJustified(op, ch, member, index, merchantOnly) || c.mayBeLearned(op, ch) {
			continue
		}
		msg := "429 REQUEST_LIMITED while no window of the limits in force could have been full"
		if merchantOnly {
			msg = "429 names the merchant's own limit (scope merchant) while the merchant's use of no window could have been at it"
		}
		c.report(Violation{Property: NoFalseRefusal, Key: op.BizType + ":" + ch, RequestID: op.RequestID, Message: msg, Excerpt: []string{rec()}})
	}
}

// refusalJustified says whether some window of some rule set that may have
// decided the request could have been too full for it at some instant
// between its invocation (less the near-cache hold) and its answer; with
// merchantOnly, some merchant's own use of a window.
func (c *checker) refusalJustified(op *Op, channel, member string, index map[groupKey]*possibleIndex, merchantOnly bool) bool {
	from, to := op.InvokeUs-c.skew-c.nearHold, completeOr(op, 0)+c.skew
	for _, rs := range c.rulesFor(op.BizType, channel, c.docsIn(from, to), from, to) {
		for _, s := range rs.windowsOf(op.Amount, op.Currency, op.MerchantID) {
			if s.shadow || merchantOnly && s.merchant == "" {
				continue
			}
			if s.window.Limit == 0 {
				return true
			}
			x := index[groupKey{s.key, s.window.ID}]
			if x == nil {
				x = &possibleIndex{id: s.window.ID, cum: []int64{0}}
			}
			inflation, during := c.redisInflation(s.key, x, from, to)
			if during {
				return true
			}
			use, byName := x.maxUse(from, to, member, s.window.Reserve)
			use += inflation
			need := use + s.window.weight(op.Amount)
			for name, r := range s.window.Reserve {
				if name != op.BizType {
					need += max(0, r-byName[name])
				}
			}
			if need > s.window.Limit {
				return true
			}
			if c.nearHold > 0 && !s.window.ID.Amount {
				// The near-cache refuses every check of a key whose
				// count window Redis last found full, the member's own
				// retries included: it cannot know which members Redis
				// holds (docs/decisions/0003-near-cache.md). So a window
				// full counting the member itself justifies a refusal
				// of its retry.
				all, allByName := x.maxUse(from, to, "", s.window.Reserve)
				all += inflation
				for name, r := range s.window.Reserve {
					if name != op.BizType {
						all += max(0, r-allByName[name])
					}
				}
				if all >= s.window.Limit {
					return true
				}
			}
		}
	}
	return false
}

// redisInflation: during a Redis fault an instance refuses on its share of
// the limit, which the history cannot replay, so any refusal then is
// accepted (during). After it, until they leave the window, an instance
// counts its in-process admissions divided by its share (docs/DESIGN.md,
// "When Redis fails": "Back to Redis"): N times each, where the record
// has them once. The inflation is (N-1) times what was admitted during the
// faults (lengthened by the fault slack) and may still be in the window.
func (c *checker) redisInflation(key string, x *possibleIndex, from, to int64) (inflation int64, during bool) {
	for _, f := range c.redisFaults {
		if f.Target != "" && f.Target != channelOf(key) {
			continue
		}
		lo, end := f.FromUs-c.skew, f.ToUs+c.faultSlack
		if overlaps(from, to, lo, end) {
			return 0, true
		}
		if end < from && c.policy == "local" {
			inflation += (c.instances - 1) * x.admittedDuring(lo, end, from)
		}
	}
	return inflation, false
}

// mayBeLearned says whether a learned limit may have refused op on channel
// (docs/OPERATIONS.md, "Limits learned from the channel"). A throttle
// lowers the learned limit of the windows the throttled payment was
// admitted into (its own key's, and the channel-wide key's); it climbs back
// by its step, max(1, ⌊limit × increase⌋), per window, from at least its
// floor, max(1, ⌊limit / 100⌋), so it lasts at most ⌈(limit − floor) /
// step⌉ windows after the last throttle, plus the channel's retry-after
// (within FaultSlack). A refusal is justified when, for some learning
// window of op's rules, a throttle that reaches it (of op's bizType for
// its own key, of any bizType on the channel for the channel-wide key) came
// that recently before op's answer. The witness bounds where payserver's
// learned limit may have bound rather than replaying it.
func (c *checker) mayBeLearned(op *Op, channel string) bool {
	from, to := op.InvokeUs-c.skew-c.nearHold, completeOr(op, 0)+c.skew
	for _, rs := range c.rulesFor(op.BizType, channel, c.docsIn(from, to), from, to) {
		for _, s := range rs.windowsFor(op.Amount, op.Currency) {
			l, named := rs.doc.Learning[s.key]
			if !named {
				l = Learning{Increase: 0.05}
			}
			w := s.window
			if l.Off || w.ID.Amount || w.ID.Calendar != "" || w.Limit < 1 {
				continue
			}
			step := max(1, int64(float64(w.Limit)*l.Increase))
			floor := max(1, w.Limit/100)
			if l.Floor > 0 {
				floor = l.Floor
			}
			lasts := (max(w.Limit-floor, 0) + step - 1) / step * w.ID.SpanUs
			wide := strings.HasPrefix(s.key, "*")
			for _, e := range c.h.Ledger {
				if e.Channel != channel || e.Op != "pay" || e.Outcome != "THROTTLED" || e.ReceivedAtUs > to || e.ReceivedAtUs < from-lasts-c.faultSlack {
					continue
				}
				if wide {
					return true
				}
				if o := c.ordersByReq[e.RequestID]; o != nil && o.BizType == op.BizType {
					return true
				}
			}
		}
	}
	return false
}
