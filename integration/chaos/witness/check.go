package witness

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Property names a promise the witness checks (doc.go lists their rules).
type Property string

// The properties, numbered as in the issue.
const (
	// SinglePay (1): at most one processed channel pay per requestId, and
	// no money moved for an order payserver ended FAILED or NOT_SENT.
	SinglePay Property = "single-pay"
	// DurableOutcome (2): every 2xx has a durable order agreeing with the
	// ledger; no order left PROCESSING or UNKNOWN after the quiet period.
	DurableOutcome Property = "durable-outcome"
	// WithinLimits (3): every admission fitted every window of the limits
	// in force.
	WithinLimits Property = "within-limits"
	// NoOrphanSlot (4): every final window member belongs to an order or
	// acquisition that can still use it.
	NoOrphanSlot Property = "no-orphan-slot"
	// AmountCounted (3, money): a window member that belongs to an order
	// holds the order's amount: the amount the limiter counted is the
	// amount paid.
	AmountCounted Property = "amount-counted"
	// NoFalseRefusal (5): every 429 had a full window or the channel's
	// THROTTLED; every 503 came during a fault.
	NoFalseRefusal Property = "no-false-refusal"
	// SlotHeld (4, the converse): a slot whose fate is to stay counted is
	// in Redis while its window is live.
	SlotHeld Property = "slot-held"
	// RefusalTookNothing (5, the refusal side): no member of a request
	// answered only 429 is in a window after the quiet period.
	RefusalTookNothing Property = "refusal-took-nothing"
	// Identity (3, the member's identity): an acquire answered as a
	// duplicate repeats an acquisition of its own amount.
	Identity Property = "identity"
	// OnePayOnTheWire (1, the wire): the channel received at most one pay
	// request per requestId.
	OnePayOnTheWire Property = "one-pay-on-the-wire"
	// HistoryError: the history cannot be checked as written (a limits
	// document that does not parse, an order naming an unknown version).
	HistoryError Property = "history"
)

// Violation is one broken promise, with the history lines that show it.
type Violation struct {
	Property Property
	// Key is the limits key ("ONLINE_PAY:ALIPAY", "*:UNIONPAY") or the
	// Redis key of a window member, when the violation is about one.
	Key string
	// Window names the window, e.g. "count/1s" or
	// "amount/day[00:00 America/Santiago] CNY".
	Window    string
	RequestID string
	Message   string
	// Excerpt is a minimal excerpt of the history: its lines (Records as
	// JSON) that show the violation.
	Excerpt []string
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s]", v.Property)
	for _, s := range []string{v.Key, v.Window} {
		if s != "" {
			fmt.Fprintf(&b, " %s", s)
		}
	}
	if v.RequestID != "" {
		fmt.Fprintf(&b, " requestId=%s", v.RequestID)
	}
	fmt.Fprintf(&b, ": %s", v.Message)
	for _, e := range v.Excerpt {
		fmt.Fprintf(&b, "\n    %s", e)
	}
	return b.String()
}

// Report is what Check found.
type Report struct {
	Operations int
	Faults     int
	Violations []Violation
	// Paths counts the limiter checks of the history by the shape of what
	// they checked (Path), in Paths' order.
	Paths []PathCount
	// MerchantChecks counts the admissions held to a merchant's own limit
	// in a window with limits per merchant.
	MerchantChecks int
}

// Summary is one line: "1234 operations, 57 faults, 0 violations".
func (r Report) Summary() string {
	return fmt.Sprintf("%d operations, %d faults, %d violations", r.Operations, r.Faults, len(r.Violations))
}

// Options are the witness's tolerances. The zero value of each field means
// its default; a negative value means none (zero tolerance).
type Options struct {
	// ClockUncertainty is how far apart the clocks that stamped the
	// history may be (runner, payserver instances, Redis, MariaDB, the
	// emulator): every comparison of times from two of them allows it.
	// Default 50ms.
	ClockUncertainty time.Duration
	// FaultSlack is how long a fault's effects may outlast its marked end
	// (breakers, reconnections, a claim's timeout). Default 10s.
	FaultSlack time.Duration
	// ScheduleSlack is how far from a schedule boundary, or from a
	// document's publication, an instance may still apply the other rule
	// (docs/OPERATIONS.md: within a second). Default 1s.
	ScheduleSlack time.Duration
	// NearCacheHold is how long a near-cache refusal may outlive the
	// Redis refusal it repeats (docs/DESIGN.md, "Near-cache": at most a
	// second). Default 1s; not used when the run had the near-cache off.
	NearCacheHold time.Duration
	// LostAnswerGrace is PAYSERVER_LOST_ANSWER_GRACE: how long a slot
	// taken by a payment answered 503 may stay held with no order.
	// Default 30s.
	LostAnswerGrace time.Duration
	// LimiterTimeout is PAYSERVER_LIMITER_TIMEOUT: the deadline of a
	// limiter check on Redis, past which the check is decided by the
	// policy (docs/PERFORMANCE.md), a 503 under deny or when its outcome
	// is unknown. Default 50ms.
	LimiterTimeout time.Duration
}

func (o Options) us(d, def time.Duration) int64 {
	switch {
	case d < 0:
		return 0
	case d == 0:
		return def.Microseconds()
	}
	return d.Microseconds()
}

// forever is an instant after every history.
const forever = int64(math.MaxInt64)

// Check verifies the history's promises by brute force from its own
// records; it never consults payserver's code.
func Check(h History, opts Options) Report {
	c := newChecker(h, opts)
	c.loadDocuments()
	c.index()
	c.checkMoney()
	c.buildAdmissions()
	c.checkLimits()
	c.checkSlots()
	c.checkHeld()
	c.checkIdentity()
	c.checkRefusals()
	return Report{Operations: len(h.Ops), Faults: len(h.Faults), Violations: c.violations, Paths: c.paths(), MerchantChecks: c.merchantChecks}
}

// docSpan is a parsed document and when it was in force.
type docSpan struct {
	doc      *Document
	fromUs   int64
	toUs     int64 // forever when still in force
	position int
}

type checker struct {
	h          History
	skew       int64 // ClockUncertainty, µs
	faultSlack int64
	// limiterTimeout is Options.LimiterTimeout, µs.
	limiterTimeout int64
	schedSlack     int64
	nearHold       int64
	grace          int64
	instances      int64
	policy         string
	violations     []Violation

	spans    []docSpan
	versions map[string]*Document

	ordersByReq map[string]*Order
	ordersByNo  map[string]*Order
	opsByReq    map[string][]*Op
	ledgerByReq map[string][]*LedgerEntry
	admissions  []*admission
	groups      map[groupKey]*group
	groupOrder  []groupKey
	maxAmount   int64
	redisFaults []Fault
	// merchantChecks counts the checks of a merchant's own use of a window
	// against its limit.
	merchantChecks int
}

func newChecker(h History, o Options) *checker {
	c := &checker{
		h:              h,
		skew:           o.us(o.ClockUncertainty, 50*time.Millisecond),
		faultSlack:     o.us(o.FaultSlack, 10*time.Second),
		schedSlack:     o.us(o.ScheduleSlack, time.Second),
		nearHold:       o.us(o.NearCacheHold, time.Second),
		grace:          o.us(o.LostAnswerGrace, 30*time.Second),
		limiterTimeout: o.us(o.LimiterTimeout, 50*time.Millisecond),
		instances:      int64(max(h.Config.Instances, 1)),
		policy:         h.Config.Policy,
		versions:       map[string]*Document{},
	}
	if c.policy == "" {
		c.policy = "local"
	}
	if h.Config.NearCacheOff {
		c.nearHold = 0
	}
	for _, f := range h.Faults {
		if f.Kind == "redis" {
			c.redisFaults = append(c.redisFaults, f)
		}
	}
	return c
}

func (c *checker) report(v Violation) { c.violations = append(c.violations, v) }

// loadDocuments parses every limits document of the history with the
// witness's own parser.
func (c *checker) loadDocuments() {
	if len(c.h.Limits) == 0 {
		c.report(Violation{Property: HistoryError, Message: "the history has no limits document"})
	}
	for i, l := range c.h.Limits {
		doc, err := ParseDocument([]byte(l.Raw))
		if err != nil {
			c.report(Violation{Property: HistoryError, Message: fmt.Sprintf("limits document %d does not parse: %v", i+1, err),
				Excerpt: []string{excerpt(Record{Limits: &c.h.Limits[i]})}})
			continue
		}
		if l.Version != "" && l.Version != doc.Version {
			c.report(Violation{Property: HistoryError, Message: fmt.Sprintf("limits document %d says version %s, its MD5 is %s", i+1, l.Version, doc.Version),
				Excerpt: []string{excerpt(Record{Limits: &c.h.Limits[i]})}})
		}
		to := l.ToUs
		if to == 0 {
			to = forever
		}
		c.spans = append(c.spans, docSpan{doc: doc, fromUs: l.FromUs, toUs: to, position: i})
		c.versions[doc.Version] = doc
	}
}

// docsIn lists the documents in force at some instant of [lo, hi], widened
// by the schedule slack (an instance applies a publication within it).
func (c *checker) docsIn(lo, hi int64) []*Document {
	var out []*Document
	for _, s := range c.spans {
		if s.fromUs <= hi+c.schedSlack && lo-c.schedSlack < s.toUs {
			out = append(out, s.doc)
		}
	}
	return out
}

func (c *checker) index() {
	c.ordersByReq = map[string]*Order{}
	c.ordersByNo = map[string]*Order{}
	for i := range c.h.Orders {
		o := &c.h.Orders[i]
		if prev := c.ordersByReq[o.RequestID]; prev != nil {
			c.report(Violation{Property: HistoryError, RequestID: o.RequestID, Message: "two order rows share a requestId (request_id is unique)",
				Excerpt: []string{excerpt(Record{Order: prev}), excerpt(Record{Order: o})}})
		}
		c.ordersByReq[o.RequestID] = o
		c.ordersByNo[o.OrderNo] = o
		c.maxAmount = max(c.maxAmount, o.Amount)
	}
	c.opsByReq = map[string][]*Op{}
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		c.opsByReq[op.RequestID] = append(c.opsByReq[op.RequestID], op)
		c.maxAmount = max(c.maxAmount, op.Amount)
	}
	for _, ops := range c.opsByReq {
		sort.SliceStable(ops, func(i, j int) bool { return ops[i].InvokeUs < ops[j].InvokeUs })
	}
	c.ledgerByReq = map[string][]*LedgerEntry{}
	for i := range c.h.Ledger {
		e := &c.h.Ledger[i]
		c.ledgerByReq[e.RequestID] = append(c.ledgerByReq[e.RequestID], e)
	}
}

// sortedKeys returns a map's keys in order, so that reports are stable.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// overlaps says whether [a1, a2] and [b1, b2] share an instant.
func overlaps(a1, a2, b1, b2 int64) bool { return a1 <= b2 && b1 <= a2 }

// completeOr is an op's completion, or when it had none, its invocation
// plus d (how long its effects may have lasted).
func completeOr(op *Op, d int64) int64 {
	if op.CompleteUs != 0 {
		return op.CompleteUs
	}
	return op.InvokeUs + d
}
