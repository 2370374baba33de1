package witness

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// redisKeyRE reads a limiter key (docs/DESIGN.md, "The limiter"):
// payserver:rl:{CHANNEL}:BIZTYPE:<window id>, bizType "*" for the
// channel-wide key and "*NAME" for a reservation name's own use, then
// "@MERCHANT" for a merchant's own use of the key's window (the merchant
// escaped: every byte but A-Z, a-z, 0-9, '_', '-' and '.' as %XX), and an
// optional ":v" for a sliding amount window's amounts hash.
var redisKeyRE = regexp.MustCompile(`^payserver:rl:\{([A-Z0-9_]+)\}:(\*?[A-Z0-9_]*)(?:@([A-Za-z0-9_.%-]+))?:([^:]+)(:v)?$`)

// Window ids: 1000 (sliding count, ms), a60000 / a60000.CNY (sliding
// amount), day.2300.Asia/Shanghai (calendar count), aday.0000.UTC.CNY
// (calendar amount).
var (
	slidingIDRE  = regexp.MustCompile(`^(a?)([0-9]+)(?:\.([A-Z]{3}))?$`)
	calendarIDRE = regexp.MustCompile(`^(a?)(day|month)\.([0-9]{2})([0-9]{2})\.([A-Za-z0-9_+\-/]+?)(?:\.([A-Z]{3}))?$`)
)

// redisWindow is what a limiter key says about its window.
type redisWindow struct {
	channel, bizType string
	// merchant, for a merchant's own use of the key's window, names the
	// merchant as the key writes it.
	merchant string
	id       WindowID
}

// key is the limits key the window counts for, merchantKey's for a
// merchant's own use.
func (rw redisWindow) key() string {
	if rw.merchant != "" {
		return merchantKey(rw.bizType+":"+rw.channel, rw.merchant)
	}
	return rw.bizType + ":" + rw.channel
}

func parseRedisKey(key string) (redisWindow, bool) {
	m := redisKeyRE.FindStringSubmatch(key)
	if m == nil {
		return redisWindow{}, false
	}
	rw := redisWindow{channel: m[1], bizType: m[2], merchant: m[3]}
	if s := slidingIDRE.FindStringSubmatch(m[4]); s != nil {
		ms, _ := strconv.ParseInt(s[2], 10, 64)
		rw.id = WindowID{Amount: s[1] == "a", SpanUs: ms * 1000, Currency: s[3]}
		return rw, true
	}
	if s := calendarIDRE.FindStringSubmatch(m[4]); s != nil {
		h, _ := strconv.Atoi(s[3])
		mi, _ := strconv.Atoi(s[4])
		if _, err := loadZone(s[5]); err != nil {
			return rw, false
		}
		rw.id = WindowID{Amount: s[1] == "a", Calendar: s[2], CutoffMin: h*60 + mi, Zone: s[5], Currency: s[6]}
		return rw, true
	}
	return rw, false
}

// Client is the name of the campaign's one limits-API client.
const Client = "chaos"

// acquisitionPrefix starts the member of every requestId the campaign's
// client acquired through the limits API: each client's requestIds are
// its own ("#api:<client>:<requestId>", docs/OPERATIONS.md); '#' is never
// in a requestId, so no payment's member starts with it.
const acquisitionPrefix = "#api:" + Client + ":"

// checkSlots checks property 4 on the window members Redis held at the
// end: each belongs to an order or an acquisition that can still use it.
func (c *checker) checkSlots() {
	dump := c.h.Config.DumpedAtUs
	for i := range c.h.Members {
		m := &c.h.Members[i]
		if strings.HasPrefix(m.Member, "#") && !strings.HasPrefix(m.Member, "#resolve:") && !strings.HasPrefix(m.Member, acquisitionPrefix) {
			continue // a calendar hash's own fields (#s, #p)
		}
		rw, ok := parseRedisKey(m.Key)
		if !ok {
			c.report(Violation{Property: HistoryError, Key: m.Key, Message: "a window member of a key the witness cannot read",
				Excerpt: []string{excerpt(Record{Member: m})}})
			continue
		}
		if rw.id.Calendar == "" && m.ScoreUs != 0 && m.ScoreUs <= dump-rw.id.SpanUs {
			continue // it left its window; the next check trims it
		}
		if o := c.ordersByReq[m.Member]; o != nil && m.Amount != 0 && o.Channel == rw.channel && m.Amount != o.Amount {
			c.report(Violation{Property: AmountCounted, Key: m.Key, Window: rw.id.String(), RequestID: m.Member,
				Message: fmt.Sprintf("the window counts %d for the member, its order pays %d", m.Amount, o.Amount),
				Excerpt: []string{excerpt(Record{Member: m}), excerpt(Record{Order: o})}})
		}
		if (!strings.HasPrefix(m.Member, "#") || strings.HasPrefix(m.Member, acquisitionPrefix)) && c.refusedOnly(m.Member) {
			rid := strings.TrimPrefix(m.Member, acquisitionPrefix)
			ex := []string{excerpt(Record{Member: m})}
			for _, op := range c.opsByReq[rid] {
				ex = append(ex, excerpt(Record{Op: op}))
			}
			c.report(Violation{Property: RefusalTookNothing, Key: m.Key, Window: rw.id.String(), RequestID: m.Member,
				Message: "every request of this requestId was answered 429, yet its member is in the window after the quiet period", Excerpt: ex})
			continue
		}
		if why := c.slotOwner(m, rw); why != "" && !c.releaseMayHaveBeenLost(strings.TrimPrefix(m.Member, acquisitionPrefix), rw.channel) {
			ex := []string{excerpt(Record{Member: m})}
			rid := strings.TrimPrefix(m.Member, acquisitionPrefix)
			if o := c.ordersByReq[rid]; o != nil {
				ex = append(ex, excerpt(Record{Order: o}))
			}
			if ops := c.opsByReq[rid]; len(ops) > 0 {
				ex = append(ex, excerpt(Record{Op: ops[len(ops)-1]}))
			}
			c.report(Violation{Property: NoOrphanSlot, Key: m.Key, Window: rw.id.String(), RequestID: m.Member,
				Message: "slot held by nobody: " + why, Excerpt: ex})
		}
	}
}

// releaseMayHaveBeenLost says whether a Redis fault that lost writes
// ended after rid's member should have left its windows (its last release
// answered 200, or its order's end, after which the pay flow releases):
// Redis replicates asynchronously, so a release the master acknowledged
// is lost with a killed master as an admission is (docs/DESIGN.md
// "Writes lost with a killed master"), and the member is back.
func (c *checker) releaseMayHaveBeenLost(rid, channel string) bool {
	var freed int64
	for _, op := range c.opsByReq[rid] {
		if op.Kind == "release" && op.Status == 200 {
			freed = max(freed, op.InvokeUs)
		}
	}
	if o := c.ordersByReq[rid]; o != nil {
		freed = max(freed, o.UpdatedAtUs)
	}
	if freed == 0 {
		return false
	}
	for _, f := range c.redisFaults {
		if (f.Target == "" || f.Target == channel) && f.LostWrites != 0 && f.ToUs+c.skew >= freed {
			return true
		}
	}
	return false
}

// slotOwner says why a member has no owner that can still use it; "" when
// it has one.
func (c *checker) slotOwner(m *Member, rw redisWindow) string {
	wide := strings.HasPrefix(rw.bizType, "*")
	bizOK := func(b string) bool {
		return !wide || rw.bizType == "*" || rw.bizType == "*"+b
	}
	switch {
	case strings.HasPrefix(m.Member, "#resolve:"):
		orderNo, _, _ := strings.Cut(strings.TrimPrefix(m.Member, "#resolve:"), ":q")
		if o := c.ordersByNo[orderNo]; o == nil || o.Channel != rw.channel {
			return "a resolver's call for an order of another channel, or of none"
		}
		return ""
	case strings.HasPrefix(m.Member, acquisitionPrefix):
		return c.acquisitionOwner(strings.TrimPrefix(m.Member, acquisitionPrefix), rw, wide, bizOK)
	}
	if c.heldForALostAnswer(m.Member, rw.channel) {
		return ""
	}
	o := c.ordersByReq[m.Member]
	if o == nil {
		return "no order has this requestId"
	}
	if !bizOK(o.BizType) || (!wide && o.BizType != rw.bizType) {
		return fmt.Sprintf("the order is of bizType %s", o.BizType)
	}
	if rw.id.Calendar != "" && o.AdmittedAtUs != 0 && periodFor(rw.id, o.AdmittedAtUs) != periodFor(rw.id, c.h.Config.DumpedAtUs) {
		return "" // an ended period's hash, dropped at the next check
	}
	if o.Channel != rw.channel {
		if o.Status == "PROCESSING" {
			return "" // a routed payment may still move to this channel
		}
		return fmt.Sprintf("the order ended %s on channel %s", o.Status, o.Channel)
	}
	switch {
	case isNotSent(o):
		return "the order ended NOT_SENT: its slot should have been released"
	case o.Status == "FAILED" && rw.id.Amount:
		return "the order ended FAILED: its amount should have been given back"
	}
	return ""
}

// heldForALostAnswer says whether a payment of rid to channel (or routed)
// was answered 503, or not at all, within the lost-answer grace of the
// dump: its slot on the channel, if it took one, is kept until the grace
// has passed, whatever order holds the requestId (a duplicate's on
// another channel, a NOT_SENT one), and only then settled against it: a
// check whose answer was lost may still reach the limiter's store, and a
// release before it would leave its record behind.
func (c *checker) heldForALostAnswer(rid, channel string) bool {
	for _, op := range c.opsByReq[rid] {
		if op.Kind == "pay" && (op.Channel == "" || op.Channel == channel) && (op.Status == 0 || op.Status == 503) &&
			completeOr(op, 0)+c.grace+c.skew > c.h.Config.DumpedAtUs {
			return true
		}
	}
	return false
}

// acquisitionOwner reads an acquisition's owner from the answers to its
// acquires and releases on the key, in the order they were sent: a 200
// owns the slot; a 503 or no answer may own it (the limiter's answer was
// lost: released within a minute unless the requestId is acquired again);
// a 429 owns nothing; a release answered 200 ends what came before it.
func (c *checker) acquisitionOwner(rid string, rw redisWindow, wide bool, bizOK func(string) bool) string {
	var owns, mayOwn, sent bool
	var released *Op
	for _, op := range c.opsByReq[rid] {
		if (op.Kind != "acquire" && op.Kind != "release") || op.Channel != rw.channel || !bizOK(op.BizType) || (!wide && op.BizType != rw.bizType) {
			continue
		}
		sent = true
		switch {
		case op.Kind == "acquire" && op.Status == 200:
			owns = true
		case op.Kind == "acquire" && (op.Status == 0 || op.Status == 503):
			mayOwn = true
		case op.Kind == "release" && op.Status == 200:
			owns, mayOwn, released = false, false, op
		case op.Kind == "release":
			// A release whose answer was lost, or refused, may not have
			// been made: what came before it stands.
		}
	}
	switch {
	case !sent:
		return "no acquire of this requestId on this key"
	case owns || mayOwn:
		return ""
	case released != nil && !c.windowLiveSince(rw, released.InvokeUs):
		// The limits API releases from the windows the limits in force
		// give the key; a window no document has had since counts the
		// member nowhere (the within-limits rule for a dropped window id).
		return ""
	case released != nil:
		return "released (200) after its last acquire that may have taken it (a 429 takes nothing)"
	}
	return "every acquire of it was refused (a 429 takes nothing)"
}

// windowLiveSince says whether some document in force on some instance
// from t to the dump has the member's window for its key: one not yet
// replaced on every instance at t (its toUs, less the clock uncertainty).
func (c *checker) windowLiveSince(rw redisWindow, t int64) bool {
	key := rw.key()
	for _, s := range c.spans {
		if (s.toUs == forever || s.toUs+c.skew > t) && s.fromUs <= c.h.Config.DumpedAtUs && s.doc.hasWindow(key, rw.id) {
			return true
		}
	}
	return false
}
