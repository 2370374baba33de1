package witness

import (
	"encoding/json"
	"sort"
)

// ruleSet is what one document enforces on a request at one moment: its
// own key's rule and its channel-wide key's.
type ruleSet struct {
	doc             *Document
	ownKey, wideKey string
	own, wide       Rule
	ownRef, wideRef scheduleRef
	wideApplies     bool
}

// scoped is one window of a rule set with the key it belongs to.
type scoped struct {
	key    string
	window Window
	shadow bool
	// merchant, on a merchant's own use of a window (windowsOf), names it.
	merchant string
}

// windowsFor lists the rule set's windows that count a request of this
// amount and currency.
func (r ruleSet) windowsFor(amount int64, currency string) []scoped {
	var out []scoped
	add := func(key string, rule Rule) {
		for _, w := range rule.Windows {
			if w.appliesTo(amount, currency) {
				out = append(out, scoped{key: key, window: w, shadow: rule.Shadow || r.doc.Shadow})
			}
		}
	}
	add(r.ownKey, r.own)
	if r.wideApplies {
		add(r.wideKey, r.wide)
	}
	return out
}

// rulesFor lists the rule sets that may have decided a request of bizType
// on channel admitted (or refused) at some instant of [lo, hi] under any of
// docs: each document's rules at the ends of the interval, widened by the
// schedule slack, and at every schedule boundary of the two keys inside.
func (c *checker) rulesFor(bizType, channel string, docs []*Document, lo, hi int64) []ruleSet {
	ownKey, wideKey := bizType+":"+channel, "*:"+channel
	var out []ruleSet
	seen := map[[3]any]bool{}
	for _, d := range docs {
		times := []int64{lo - c.schedSlack, hi + c.schedSlack}
		for _, s := range d.Schedules {
			for _, b := range []int64{s.FromUs, s.ToUs} {
				if (s.Key == ownKey || s.Key == wideKey) && lo-c.schedSlack < b && b <= hi+c.schedSlack {
					times = append(times, b)
				}
			}
		}
		for _, t := range times {
			own, oref := d.ruleAt(ownKey, t)
			wide, wref := d.ruleAt(wideKey, t)
			k := [3]any{d.Version, oref, wref}
			if seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, ruleSet{doc: d, ownKey: ownKey, wideKey: wideKey, own: own, wide: wide,
				ownRef: oref, wideRef: wref, wideApplies: bizType != "RESOLVE"})
		}
	}
	return out
}

// admission is one slot taken in the windows: an order's, or an
// acquisition's (member "#api:chaos:<requestId>").
type admission struct {
	member   string
	merchant string // as the order or request named it; "" for none
	bizType  string
	channel  string
	amount   int64
	currency string
	// lo and hi bound the admission's time (Redis µs); equal when known
	// exactly.
	lo, hi int64
	rules  []ruleSet
	// countUntil and amountUntil: until when the slot is certainly held in
	// count windows and in amount windows (a release or a give-back can
	// only come later).
	countUntil, amountUntil int64
	// possibleOnly admissions may not have happened at all (an answer was
	// lost); they count only where a refusal is being justified.
	possibleOnly bool
	rec          Record
}

// certain says whether the admission can be checked on its own: its time
// is exact and one rule set decided it.
func (a *admission) certain() bool { return !a.possibleOnly && a.lo == a.hi && len(a.rules) == 1 }

// buildAdmissions gathers the slots of the history: orders with an
// admission record, acquisitions answered 200, and the slots that answers
// lost may have taken.
func (c *checker) buildAdmissions() {
	for i := range c.h.Orders {
		o := &c.h.Orders[i]
		if o.AdmittedAtUs == 0 {
			continue
		}
		doc := c.versions[o.LimitsVersion]
		if doc == nil {
			c.report(Violation{Property: HistoryError, RequestID: o.RequestID,
				Message: "the order records limits version " + o.LimitsVersion + ", which no limits document of the history has",
				Excerpt: []string{excerpt(Record{Order: o})}})
			continue
		}
		a := &admission{member: o.RequestID, merchant: o.MerchantID, bizType: o.BizType, channel: o.Channel, amount: o.Amount, currency: o.Currency,
			lo: o.AdmittedAtUs, hi: o.AdmittedAtUs, countUntil: forever, amountUntil: forever, rec: Record{Order: o}}
		// A retry or a concurrent duplicate may have found the member
		// already held (admitted earlier, at a time no row records); the
		// row's time is then only an upper bound.
		n := 0
		for _, op := range c.opsByReq[o.RequestID] {
			if op.Kind == "pay" && op.InvokeUs <= o.AdmittedAtUs+c.skew {
				n++
				if n == 1 {
					a.lo = min(a.lo, op.InvokeUs-c.skew)
				}
			}
		}
		if n < 2 {
			a.lo = a.hi
		}
		if o.Status == "FAILED" {
			a.amountUntil = o.UpdatedAtUs - c.skew
			if isNotSent(o) {
				a.countUntil = o.UpdatedAtUs - c.skew
			}
		}
		a.rules = c.rulesFor(a.bizType, a.channel, []*Document{doc}, a.lo, a.hi)
		c.admissions = append(c.admissions, a)
		c.addRouteGhosts(o)
	}
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		switch op.Kind {
		case "acquire":
			c.addAcquisition(op)
		case "pay":
			if c.ordersByReq[op.RequestID] == nil && (op.Status == 0 || op.Status == 503) && op.Channel != "" {
				c.addGhost(op, op.BizType, op.Channel, op.RequestID)
			}
		}
	}
}

// addAcquisition: an acquire answered 200 (not a duplicate) took a slot;
// one with no answer, or a 503, may have.
func (c *checker) addAcquisition(op *Op) {
	var body struct {
		Duplicate bool `json:"duplicate"`
	}
	switch {
	case op.Status == 200:
		_ = json.Unmarshal(op.Body, &body)
		if body.Duplicate {
			return
		}
	case op.Status == 0 || op.Status == 503:
		c.addGhost(op, op.BizType, op.Channel, acquisitionPrefix+op.RequestID)
		return
	default:
		return
	}
	a := &admission{member: acquisitionPrefix + op.RequestID, merchant: op.MerchantID, bizType: op.BizType, channel: op.Channel, amount: op.Amount, currency: op.Currency,
		lo: op.InvokeUs - c.skew, hi: op.CompleteUs + c.skew, countUntil: forever, amountUntil: forever, rec: Record{Op: op}}
	if op.AdmittedAtUs != 0 {
		a.lo, a.hi = op.AdmittedAtUs, op.AdmittedAtUs
	}
	for _, later := range c.opsByReq[op.RequestID] {
		if later.Kind == "release" && later.InvokeUs > op.InvokeUs && later.Channel == op.Channel && later.BizType == op.BizType {
			a.countUntil = min(a.countUntil, later.InvokeUs-c.skew)
			a.amountUntil = a.countUntil
		}
	}
	a.rules = c.rulesFor(a.bizType, a.channel, c.docsIn(a.lo, a.hi), a.lo, a.hi)
	c.admissions = append(c.admissions, a)
}

// addGhost adds a slot an operation may have taken without any record of
// it: its answer was lost, or it was a 503 after the limiter.
func (c *checker) addGhost(op *Op, bizType, channel, member string) {
	lo, hi := op.InvokeUs-c.skew, completeOr(op, c.grace)+c.skew
	a := &admission{member: member, merchant: op.MerchantID, bizType: bizType, channel: channel, amount: op.Amount, currency: op.Currency,
		lo: lo, hi: hi, countUntil: forever, amountUntil: forever, possibleOnly: true, rec: Record{Op: op}}
	a.rules = c.rulesFor(bizType, channel, c.docsIn(lo, hi), lo, hi)
	c.admissions = append(c.admissions, a)
}

// addRouteGhosts: a routed payment may have held a slot on each candidate
// of its route before the one it ended on, while its requests ran.
func (c *checker) addRouteGhosts(o *Order) {
	for _, op := range c.opsByReq[o.RequestID] {
		if op.Kind != "pay" || op.Channel != "" {
			continue
		}
		seen := map[string]bool{o.Channel: true}
		for _, d := range c.docsIn(op.InvokeUs, completeOr(op, c.grace)) {
			for _, ch := range d.Routes[o.BizType] {
				if !seen[ch] {
					seen[ch] = true
					c.addGhost(op, o.BizType, ch, o.RequestID)
				}
			}
		}
	}

}

// groupKey names one window of one key: the unit the sweeps work on.
type groupKey struct {
	key string
	id  WindowID
}

// group is every admission recorded, or possibly recorded, in one window.
type group struct {
	key      groupKey
	recorded []*admission // in the window under every rule set that may have decided it
	possible []*admission // in the window under some rule set
}

// buildGroups sorts the admissions into the windows they count in.
func (c *checker) buildGroups() {
	c.groups = map[groupKey]*group{}
	for _, a := range c.admissions {
		count := map[groupKey]int{}
		for _, rs := range a.rules {
			seen := map[groupKey]bool{}
			for _, s := range rs.windowsOf(a.amount, a.currency, a.merchant) {
				k := groupKey{s.key, s.window.ID}
				if !seen[k] {
					seen[k] = true
					count[k]++
				}
			}
		}
		for k, n := range count {
			g := c.groups[k]
			if g == nil {
				g = &group{key: k}
				c.groups[k] = g
				c.groupOrder = append(c.groupOrder, k)
			}
			g.possible = append(g.possible, a)
			if n == len(a.rules) && !a.possibleOnly {
				g.recorded = append(g.recorded, a)
			}
		}
	}
	sort.Slice(c.groupOrder, func(i, j int) bool {
		a, b := c.groupOrder[i], c.groupOrder[j]
		if a.key != b.key {
			return a.key < b.key
		}
		return a.id.String() < b.id.String()
	})
}
