// Package limits reads the limits document: the YAML or JSON that ops
// publish (in Nacos or a watched file) to say what the limiter enforces and
// where payments without a channel go. Parse validates a whole document into
// a Document: the ratelimit.Config the limiter enforces, and the Routes the
// pay flow reads. The config center (internal/configcenter) applies each
// document it delivers through Parse, and `payserver check-limits` checks one
// offline.
package limits

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"payserver/internal/ratelimit"
)

// Bounds on what a limits document may ask for. They keep one key's sorted
// sets and the Lua script's work bounded.
const (
	MinWindow        = 10 * time.Millisecond
	MaxWindow        = 7 * 24 * time.Hour
	MaxLimit         = 10_000_000
	MaxWindowsPerKey = 8
	MaxKeys          = 10_000
	// MaxAmount is the largest amount cap, in minor units: 10^15 is ten
	// trillion of a two-decimal currency, far above any channel contract,
	// and far enough below 2^53 that the Lua script's double arithmetic
	// stays exact when a window's sum and a request's amount are added.
	MaxAmount = 1_000_000_000_000_000
	// MaxSchedules is the most schedules one document may hold, past ones
	// included.
	MaxSchedules     = 1000
	maxDocumentBytes = 1 << 20
)

// ErrEmptyDocument is returned for a document with no content. An empty
// document never clears the limits in force.
var ErrEmptyDocument = errors.New("limits document is empty")

// Document is a validated limits document. It is immutable: a new document
// is a new Document that replaces the old one whole.
type Document struct {
	// Config is what the limiter enforces: every key's rule, the schedules,
	// and the document's Version (the hex MD5 of its bytes).
	Config *ratelimit.Config
	// Routes are the routes of payments without a channel (routes.go); nil
	// or empty when the document has none.
	Routes Routes
}

// Parse validates a limits document, YAML or JSON, and returns the Document
// it describes. The whole document is checked: any error refuses all of it.
// Two shapes are accepted:
//
//	window: 1s                 # default window for bare numbers (default 1s)
//	zone: Asia/Shanghai        # default zone of calendar windows (default UTC)
//	shadow: false              # optional: every key in shadow mode
//	limits:
//	  ONLINE_PAY:ALIPAY: 100   # 100 per 1s sliding window
//	  ONLINE_PAY:WECHAT: -1    # unlimited
//	  REFUND:ALIPAY:           # several windows, all enforced together
//	    - {limit: 20, window: 1s}
//	    - {limit: 600, window: 1m}
//	    - {amount: 500000000, calendar: day, currency: CNY}
//	    - {limit: 300000, calendar: day, cutoff: "23:00"}
//	  REFUND:WECHAT: {limit: 5, window: 1s, shadow: true}
//	  REFUND:UNIONPAY: {shadow: true, windows: [{limit: 5, window: 1s}]}
//	  "*:UNIONPAY":            # channel-wide: every bizType together
//	    - {limit: 200, window: 1s, reserve: {REFUND: 40}}
//	  ONLINE_PAY:UNIONPAY:     # each merchant at most 10/s, M_VIP 40/s
//	    - {limit: 100, window: 1s, perMerchant: 10, merchants: {M_VIP: 40}}
//	  RESOLVE:ALIPAY: {limit: 50, window: 1s}   # the resolver's queries
//	schedules:                 # replace one key's limits for a while
//	  - {key: "*:UNIONPAY", from: "2026-12-01T02:00:00+08:00", to: "2026-12-01T04:00:00+08:00", limits: 0}
//	routes:                    # payments without a channel: candidates in order
//	  ONLINE_PAY: [ALIPAY, WECHAT]
//	adaptive:                  # how keys learn from the channel's throttling
//	  REFUND:ALIPAY: off       # (every key learns, with the defaults, unless named)
//
// and a flat map of key to number (the original countLimitMap), whose
// numbers use a 1s window:
//
//	{"ONLINE_PAY:ALIPAY": 100, "ONLINE_PAY:WECHAT": -1}
//
// The window entries are described in parseWindow, schedules in
// parseSchedules, routes in parseRoutes, adaptive in parseAdaptive. RESOLVE is a reserved bizType (ratelimit.ResolveBizType): a
// RESOLVE:CHANNEL key counts the resolver's queries of the channel and
// nothing else counts there; it takes count windows only (sliding or
// calendar), is unlimited when the document does not set it, and no
// reservation or route may name RESOLVE. Unknown fields are errors, as are
// empty documents and documents that name no key at all (which would
// silently make every channel unlimited). Each error names the key, or the
// schedule, it is about. The Config's Version is the hex MD5 of data.
func Parse(data []byte) (*Document, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, ErrEmptyDocument
	}
	if len(data) > maxDocumentBytes {
		return nil, fmt.Errorf("limits document is %d bytes; at most %d", len(data), maxDocumentBytes)
	}
	root, err := yamlRoot(data)
	if err != nil {
		return nil, err
	}
	if len(root) == 0 {
		return nil, ErrEmptyDocument
	}
	sum := md5.Sum(data)
	cfg := &ratelimit.Config{DefaultWindow: time.Second, Zone: time.UTC, Rules: map[ratelimit.Key]ratelimit.Rule{}, Version: hex.EncodeToString(sum[:])}
	doc := &Document{Config: cfg}
	limits, err := splitRoot(root, doc)
	if err != nil {
		return nil, err
	}
	if len(limits) == 0 {
		return nil, errors.New("limits document names no key; write -1 for a key to make it unlimited")
	}
	if len(limits) > MaxKeys {
		return nil, fmt.Errorf("limits document has %d keys; at most %d", len(limits), MaxKeys)
	}
	names := make([]string, 0, len(limits))
	for name := range limits {
		names = append(names, name)
	}
	sort.Strings(names)
	var problems []string
	for _, name := range names {
		key, err := ratelimit.ParseKey(name)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		rule, err := parseRule(limits[name], ruleContext{cfg: cfg, key: key})
		if err != nil {
			problems = append(problems, fmt.Sprintf("key %q: %v", name, err))
			continue
		}
		cfg.Rules[key] = rule
	}
	if sv, ok := root["schedules"]; ok {
		schedules, errs := parseSchedules(sv, cfg)
		problems = append(problems, errs...)
		cfg.Schedules = schedules
	}
	if av, ok := root["adaptive"]; ok && len(problems) == 0 {
		problems = append(problems, parseAdaptive(av, cfg)...)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	cfg.IndexSchedules()
	return doc, nil
}

// splitRoot reads the top-level fields into doc and returns the key map.
// The schedules are read by Parse once the keys are, as they use the
// default window and zone.
func splitRoot(root map[string]any, doc *Document) (map[string]any, error) {
	cfg := doc.Config
	_, hasLimits := root["limits"]
	if !hasLimits {
		for name := range root {
			if name == "window" || name == "shadow" || name == "zone" || name == "schedules" || name == "routes" || name == "adaptive" {
				return nil, errors.New(`limits document has "` + name + `" but no "limits" map`)
			}
		}
		return root, nil // the flat countLimitMap shape
	}
	for name, v := range root {
		switch name {
		case "limits", "schedules", "adaptive":
		case "window":
			d, err := parseWindowSize(v)
			if err != nil {
				return nil, fmt.Errorf("window: %w", err)
			}
			cfg.DefaultWindow = d
		case "zone":
			z, err := parseZone(v)
			if err != nil {
				return nil, fmt.Errorf("zone: %w", err)
			}
			cfg.Zone = z
		case "shadow":
			b, ok := v.(bool)
			if !ok {
				return nil, errors.New("shadow: want true or false")
			}
			cfg.Shadow = b
		case "routes":
			routes, err := parseRoutes(v)
			if err != nil {
				return nil, err
			}
			doc.Routes = routes
		default:
			return nil, fmt.Errorf("unknown top-level field %q (want window, zone, shadow, limits, schedules, routes, adaptive)", name)
		}
	}
	limits, ok := root["limits"].(map[string]any)
	if !ok {
		if root["limits"] == nil {
			return map[string]any{}, nil
		}
		return nil, errors.New("limits: want a map of BIZTYPE:CHANNEL to a limit")
	}
	return limits, nil
}

// ruleContext is what reading one key's rule needs from the rest of the
// document.
type ruleContext struct {
	cfg *ratelimit.Config // DefaultWindow and Zone are set
	key ratelimit.Key
}

// parseRule reads one key's value: a number, a list of windows, or an object.
func parseRule(v any, rc ruleContext) (ratelimit.Rule, error) {
	switch val := v.(type) {
	case []any:
		return buildRule(val, false, rc)
	case map[string]any:
		return parseRuleObject(val, rc)
	default:
		n, err := parseLimit(v)
		if err != nil {
			return ratelimit.Rule{}, err
		}
		return newRule([]entry{{w: ratelimit.Window{Limit: n, Size: rc.cfg.DefaultWindow}}}, false)
	}
}

func parseRuleObject(obj map[string]any, rc ruleContext) (ratelimit.Rule, error) {
	shadow := false
	if s, ok := obj["shadow"]; ok {
		b, ok := s.(bool)
		if !ok {
			return ratelimit.Rule{}, errors.New("shadow: want true or false")
		}
		shadow = b
	}
	if ws, ok := obj["windows"]; ok {
		for name := range obj {
			if name != "windows" && name != "shadow" {
				return ratelimit.Rule{}, fmt.Errorf("unknown field %q beside windows (want windows, shadow)", name)
			}
		}
		list, ok := ws.([]any)
		if !ok {
			return ratelimit.Rule{}, errors.New("windows: want a list of {limit, window}")
		}
		return buildRule(list, shadow, rc)
	}
	e, err := parseWindow(obj, rc, true)
	if err != nil {
		return ratelimit.Rule{}, err
	}
	return newRule([]entry{e}, shadow)
}

func buildRule(list []any, shadow bool, rc ruleContext) (ratelimit.Rule, error) {
	if len(list) == 0 {
		return ratelimit.Rule{}, errors.New("empty window list; write -1 for unlimited")
	}
	if len(list) > MaxWindowsPerKey {
		return ratelimit.Rule{}, fmt.Errorf("%d windows; at most %d", len(list), MaxWindowsPerKey)
	}
	es := make([]entry, 0, len(list))
	for i, item := range list {
		obj, ok := item.(map[string]any)
		if !ok {
			return ratelimit.Rule{}, fmt.Errorf("window %d: want {limit, window}", i+1)
		}
		e, err := parseWindow(obj, rc, false)
		if err != nil {
			return ratelimit.Rule{}, fmt.Errorf("window %d: %w", i+1, err)
		}
		es = append(es, e)
	}
	return newRule(es, shadow)
}

// newRule drops unlimited windows, sorts the rest as ratelimit.Rule.Windows
// says (with their reservations) and rejects two windows with one ID.
func newRule(es []entry, shadow bool) (ratelimit.Rule, error) {
	kept := es[:0:0]
	for _, e := range es {
		if e.w.Limit != ratelimit.Unlimited {
			kept = append(kept, e)
		}
	}
	sort.SliceStable(kept, func(i, j int) bool { return windowLess(kept[i].w, kept[j].w) })
	for i := 1; i < len(kept); i++ {
		if kept[i].w.ID() == kept[i-1].w.ID() {
			return ratelimit.Rule{}, fmt.Errorf("two windows of %s (one window may appear once)", describeSpan(kept[i].w))
		}
	}
	if len(kept) == 0 {
		return ratelimit.Rule{Shadow: shadow}, nil
	}
	r := ratelimit.Rule{Windows: make([]ratelimit.Window, len(kept)), Shadow: shadow}
	for i, e := range kept {
		r.Windows[i] = e.w
		if e.reserve != nil {
			if r.Reserve == nil {
				r.Reserve = make([]map[string]int64, len(kept))
			}
			r.Reserve[i] = e.reserve
		}
		if e.merchants != nil {
			if r.Merchants == nil {
				r.Merchants = make([]*ratelimit.Merchants, len(kept))
			}
			r.Merchants[i] = e.merchants
		}
	}
	return r, nil
}

// windowLess orders windows as ratelimit.Rule.Windows says: sliding
// windows by size, shortest first, then calendar windows, day before
// month; count before amount; then by ID, so that the order never depends
// on the document's.
func windowLess(a, b ratelimit.Window) bool {
	if a.IsCalendar() != b.IsCalendar() {
		return !a.IsCalendar()
	}
	if a.Size != b.Size {
		return a.Size < b.Size
	}
	if a.Calendar.Unit != b.Calendar.Unit {
		return a.Calendar.Unit == ratelimit.CalendarDay
	}
	if a.Amount != b.Amount {
		return !a.Amount
	}
	return a.ID() < b.ID()
}

// describeSpan names a window's span as the document writes it: "1s",
// "day from 23:00 in Asia/Shanghai", with "amount" before an amount
// window's.
func describeSpan(w ratelimit.Window) string {
	s := ratelimit.FormatSize(w.Size)
	if w.IsCalendar() {
		s = fmt.Sprintf("%s from %s in %s", w.Calendar.Unit, ratelimit.FormatCutoff(w.Calendar.Cutoff), w.Calendar.Zone)
	}
	if w.Amount {
		s = "amount " + s
		if w.Currency != "" {
			s += " in " + w.Currency
		}
	}
	return s
}

func parseLimit(v any) (int64, error) {
	n, err := parseWhole("limit", v, MaxLimit)
	if err != nil {
		return 0, err
	}
	if n < ratelimit.Unlimited {
		return 0, fmt.Errorf("limit %d: want 0..%d, or -1 for unlimited", n, MaxLimit)
	}
	return n, nil
}

// parseAmount reads an amount cap in minor units: 0..MaxAmount. An amount
// cap has no unlimited value: leave the entry out instead.
func parseAmount(v any) (int64, error) {
	n, err := parseWhole("amount", v, MaxAmount)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("amount %d is negative: want 0..%d minor units (leave the entry out for no cap)", n, int64(MaxAmount))
	}
	return n, nil
}

// parseWhole reads a whole number field no larger than most in absolute
// value.
func parseWhole(field string, v any, most int64) (int64, error) {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("%s %d is too large; at most %d", field, x, most)
		}
		n = int64(x)
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) || math.IsNaN(x) {
			return 0, fmt.Errorf("%s %v: want a whole number", field, x)
		}
		if math.Abs(x) > float64(most) {
			return 0, fmt.Errorf("%s %v is too large; at most %d", field, x, most)
		}
		n = int64(x)
	case string:
		return 0, fmt.Errorf("%s %q: want a number, not a string", field, x)
	default:
		if field == "limit" {
			return 0, errors.New("limit: want a number, -1 for unlimited")
		}
		return 0, fmt.Errorf("%s: want a number", field)
	}
	if n > most {
		return 0, fmt.Errorf("%s %d is too large; at most %d", field, n, most)
	}
	return n, nil
}

// parseWindowSize reads a duration such as "500ms", "1s", "1m", "1h" or "1d".
func parseWindowSize(v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("want a duration such as \"1s\", \"1m\" or \"1d\", got %v", v)
	}
	s = strings.TrimSpace(s)
	// The range as a document writes it: MaxWindow is 7 days.
	outOfRange := fmt.Sprintf("is out of range %s..%dd", MinWindow, MaxWindow/(24*time.Hour))
	var d time.Duration
	var err error
	if days, found := strings.CutSuffix(s, "d"); found {
		var n int64
		n, err = strconv.ParseInt(days, 10, 64)
		if err == nil && (n < 1 || n > int64(MaxWindow/(24*time.Hour))) {
			return 0, fmt.Errorf("%s %s", s, outOfRange)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as \"1s\", \"1m\" or \"1d\"", s)
	}
	if d < MinWindow || d > MaxWindow {
		return 0, fmt.Errorf("%s %s", d, outOfRange)
	}
	if d%time.Millisecond != 0 {
		return 0, fmt.Errorf("%s: want whole milliseconds", d)
	}
	return d, nil
}
