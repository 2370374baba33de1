package witness

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // zones the same on every host, as docs/OPERATIONS.md says of payserver

	"gopkg.in/yaml.v3"
)

// Document is a limits document as the witness reads it: only what decides
// admissions (docs/OPERATIONS.md, "Changing a channel limit" and "Channel
// quotas"). Routes are read and ignored.
type Document struct {
	// Version is the MD5 of the raw bytes, the version payserver records
	// in orders.limits_version and GET /limits/history.
	Version string
	// Shadow is the top-level `shadow: true`: every key evaluates and
	// never refuses.
	Shadow bool
	// Keys maps "BIZTYPE:CHANNEL" and "*:CHANNEL" to their rule. A key
	// that is absent is unlimited.
	Keys map[string]Rule
	// Schedules replace a key's rule from From (inclusive) to To
	// (exclusive).
	Schedules []Schedule
	// Routes maps a bizType to its candidate channels, in order.
	Routes map[string][]string
	// Learning maps a key to how its sliding count windows learn from the
	// channel's throttling (docs/OPERATIONS.md, "Limits learned from the
	// channel"): every key learns, climbing back by Increase of its limit
	// per window (default 0.05), unless the document's adaptive section
	// says off.
	Learning map[string]Learning
}

// Learning is one key's adaptive setting as far as the witness needs it:
// whether it learns, and how fast a learned limit climbs back.
type Learning struct {
	Off      bool
	Increase float64
	Floor    int64
}

// Rule is what one key enforces: all of its windows together.
type Rule struct {
	// Windows are the limited windows; unlimited (-1) entries are left
	// out, so a rule with no windows is unlimited.
	Windows []Window
	// Shadow rules evaluate but always admit.
	Shadow bool
}

// Schedule is a timed replacement of one key's rule.
type Schedule struct {
	Key      string
	FromUs   int64
	ToUs     int64
	Rule     Rule
	position int
}

// Window is one limited window of a rule.
type Window struct {
	ID WindowID
	// Limit is the count limit, or the cap on the sum of amounts (minor
	// units) for an amount window; 0 closes the key.
	Limit int64
	// Reserve keeps part of a channel-wide window for named bizTypes.
	Reserve map[string]int64
	// PerMerchant and Merchants are the window's limits per merchant:
	// each merchant's own use of the window may reach its override, else
	// PerMerchant; -1 is no limit. HasMerchants says the window has any.
	PerMerchant  int64
	Merchants    map[string]int64
	HasMerchants bool
	loc          *time.Location
}

// merchantLimit is merchant's own limit in w: its override, else
// PerMerchant; -1 for none.
func (w Window) merchantLimit(merchant string) int64 {
	if n, ok := w.Merchants[merchant]; ok {
		return n
	}
	return w.PerMerchant
}

// WindowID identifies a window across documents: everything but the limit
// (docs/DESIGN.md, "The rules": a change that keeps a window's id keeps its
// members; a new id starts empty).
type WindowID struct {
	Amount bool
	// SpanUs is a sliding window's size; 0 for a calendar window.
	SpanUs int64
	// Calendar is "day" or "month" for a calendar window.
	Calendar string
	// CutoffMin is the calendar period's start, minutes after local midnight.
	CutoffMin int
	Zone      string
	// Currency limits an amount window to payments in it; "" is any.
	Currency string
}

func (id WindowID) String() string {
	kind := "count"
	if id.Amount {
		kind = "amount"
	}
	var s string
	if id.Calendar != "" {
		s = fmt.Sprintf("%s/%s[%02d:%02d %s]", kind, id.Calendar, id.CutoffMin/60, id.CutoffMin%60, id.Zone)
	} else {
		s = fmt.Sprintf("%s/%s", kind, time.Duration(id.SpanUs*1000))
	}
	if id.Currency != "" {
		s += " " + id.Currency
	}
	return s
}

// appliesTo says whether the window counts a request: every count window,
// an amount window only for a request with an amount in its currency (any
// currency when it names none).
func (w Window) appliesTo(amount int64, currency string) bool {
	if !w.ID.Amount {
		return true
	}
	return amount > 0 && (w.ID.Currency == "" || w.ID.Currency == currency)
}

// weight is what a request adds to the window: 1, or its amount.
func (w Window) weight(amount int64) int64 {
	if w.ID.Amount {
		return amount
	}
	return 1
}

var (
	codeRE     = regexp.MustCompile(`^[A-Z0-9_]{1,32}$`)
	durationRE = regexp.MustCompile(`^([0-9]+)(ms|s|m|h|d)$`)
	cutoffRE   = regexp.MustCompile(`^([0-9]{2}):([0-9]{2})$`)
	currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)
)

var unitUs = map[string]int64{"ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6, "d": 86400e6}

// ParseDocument reads a limits document (YAML or JSON). It refuses what it
// does not understand rather than guess: a field it does not know might
// change what is enforced.
func ParseDocument(raw []byte) (*Document, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, err
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("not a mapping")
	}
	sum := md5.Sum(raw)
	p := docParser{defaultSpanUs: 1e6, zone: "UTC"}
	doc := &Document{Version: hex.EncodeToString(sum[:]), Keys: map[string]Rule{}, Routes: map[string][]string{}}
	top := root.Content[0]
	fields, err := fieldsOf(top, "window", "zone", "shadow", "routes", "limits", "schedules", "adaptive")
	if err != nil {
		return nil, err
	}
	if n := fields["window"]; n != nil {
		if p.defaultSpanUs, err = parseSpan(n.Value); err != nil {
			return nil, fmt.Errorf("window: %w", err)
		}
	}
	if n := fields["zone"]; n != nil {
		if _, err := loadZone(n.Value); err != nil {
			return nil, err
		}
		p.zone = n.Value
	}
	if n := fields["shadow"]; n != nil {
		if err := n.Decode(&doc.Shadow); err != nil {
			return nil, fmt.Errorf("shadow: %w", err)
		}
	}
	if n := fields["routes"]; n != nil {
		if err := n.Decode(&doc.Routes); err != nil {
			return nil, fmt.Errorf("routes: %w", err)
		}
	}
	if n := fields["limits"]; n != nil {
		if n.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("limits: not a mapping")
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if err := checkKey(key); err != nil {
				return nil, err
			}
			if _, dup := doc.Keys[key]; dup {
				return nil, fmt.Errorf("key %q written twice", key)
			}
			rule, err := p.rule(n.Content[i+1], isChannelWide(key))
			if err != nil {
				return nil, fmt.Errorf("key %q: %w", key, err)
			}
			doc.Keys[key] = rule
		}
	}
	if n := fields["adaptive"]; n != nil {
		var raw map[string]any
		if err := n.Decode(&raw); err != nil {
			return nil, fmt.Errorf("adaptive: %w", err)
		}
		doc.Learning = map[string]Learning{}
		for key, v := range raw {
			l := Learning{Increase: 0.05}
			switch x := v.(type) {
			case string:
				l.Off = x == "off"
			case bool:
				l.Off = !x
			case map[string]any:
				if inc, ok := x["increase"].(float64); ok && inc > 0 {
					l.Increase = inc
				}
				if f, ok := x["floor"].(int); ok && f > 0 {
					l.Floor = int64(f)
				}
			}
			doc.Learning[key] = l
		}
	}
	if n := fields["schedules"]; n != nil {
		if n.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("schedules: not a list")
		}
		for i, sn := range n.Content {
			s, err := p.schedule(sn)
			if err != nil {
				return nil, fmt.Errorf("schedule %d: %w", i+1, err)
			}
			s.position = i
			doc.Schedules = append(doc.Schedules, s)
		}
	}
	return doc, nil
}

type docParser struct {
	defaultSpanUs int64
	zone          string
}

func (p docParser) schedule(n *yaml.Node) (Schedule, error) {
	fields, err := fieldsOf(n, "key", "from", "to", "limits")
	if err != nil {
		return Schedule{}, err
	}
	for _, f := range []string{"key", "from", "to", "limits"} {
		if fields[f] == nil {
			return Schedule{}, fmt.Errorf("%s missing", f)
		}
	}
	s := Schedule{Key: fields["key"].Value}
	if err := checkKey(s.Key); err != nil {
		return s, err
	}
	for name, dst := range map[string]*int64{"from": &s.FromUs, "to": &s.ToUs} {
		t, err := time.Parse(time.RFC3339Nano, fields[name].Value)
		if err != nil {
			return s, fmt.Errorf("%s: %w", name, err)
		}
		*dst = t.UnixMicro()
	}
	if s.ToUs <= s.FromUs {
		return s, fmt.Errorf("to is not after from")
	}
	s.Rule, err = p.rule(fields["limits"], isChannelWide(s.Key))
	return s, err
}

// rule reads a key's value: a number (with the default window; -1
// unlimited, 0 closed), one window entry, or a list of them.
func (p docParser) rule(n *yaml.Node, channelWide bool) (Rule, error) {
	var entries []*yaml.Node
	switch n.Kind {
	case yaml.ScalarNode, yaml.MappingNode:
		entries = []*yaml.Node{n}
	case yaml.SequenceNode:
		entries = n.Content
	default:
		return Rule{}, fmt.Errorf("want a number, a window or a list of windows")
	}
	var r Rule
	seen := map[WindowID]bool{}
	for i, e := range entries {
		w, shadow, unlimited, err := p.window(e, channelWide)
		if err != nil {
			return r, fmt.Errorf("window %d: %w", i+1, err)
		}
		r.Shadow = r.Shadow || shadow
		if unlimited {
			continue
		}
		if seen[w.ID] {
			return r, fmt.Errorf("window %d: the same window as another", i+1)
		}
		seen[w.ID] = true
		r.Windows = append(r.Windows, w)
	}
	return r, nil
}

func (p docParser) window(n *yaml.Node, channelWide bool) (w Window, shadow, unlimited bool, err error) {
	if n.Kind == yaml.ScalarNode {
		limit, err := parseInt(n)
		if err != nil {
			return w, false, false, err
		}
		if limit < 0 {
			return w, false, limit == -1, negative(limit)
		}
		w.ID = WindowID{SpanUs: p.defaultSpanUs}
		w.Limit = limit
		return w, false, false, nil
	}
	fields, err := fieldsOf(n, "limit", "amount", "window", "calendar", "cutoff", "zone", "currency", "reserve", "shadow", "perMerchant", "merchants")
	if err != nil {
		return w, false, false, err
	}
	if (fields["limit"] == nil) == (fields["amount"] == nil) {
		return w, false, false, fmt.Errorf("want exactly one of limit or amount")
	}
	if fields["window"] != nil && fields["calendar"] != nil {
		return w, false, false, fmt.Errorf("want at most one of window or calendar")
	}
	if f := fields["shadow"]; f != nil {
		if err := f.Decode(&shadow); err != nil {
			return w, false, false, fmt.Errorf("shadow: %w", err)
		}
	}
	if f := fields["limit"]; f != nil {
		if w.Limit, err = parseInt(f); err != nil {
			return w, false, false, err
		}
		if w.Limit < 0 {
			return w, shadow, w.Limit == -1, negative(w.Limit)
		}
	} else {
		w.ID.Amount = true
		if w.Limit, err = parseInt(fields["amount"]); err != nil {
			return w, false, false, err
		}
		if w.Limit < 0 {
			return w, false, false, fmt.Errorf("amount %d is negative", w.Limit)
		}
	}
	switch {
	case fields["calendar"] != nil:
		w.ID.Calendar = fields["calendar"].Value
		if w.ID.Calendar != "day" && w.ID.Calendar != "month" {
			return w, false, false, fmt.Errorf("calendar: %q, want day or month", w.ID.Calendar)
		}
		w.ID.Zone = p.zone
		if f := fields["zone"]; f != nil {
			w.ID.Zone = f.Value
		}
		if w.loc, err = loadZone(w.ID.Zone); err != nil {
			return w, false, false, err
		}
		if f := fields["cutoff"]; f != nil {
			m := cutoffRE.FindStringSubmatch(f.Value)
			h, _ := strconv.Atoi(safeIndex(m, 1))
			mi, _ := strconv.Atoi(safeIndex(m, 2))
			if m == nil || h > 23 || mi > 59 {
				return w, false, false, fmt.Errorf("cutoff: %q, want HH:MM", f.Value)
			}
			w.ID.CutoffMin = h*60 + mi
		}
	case fields["cutoff"] != nil || fields["zone"] != nil:
		return w, false, false, fmt.Errorf("cutoff and zone are for calendar windows")
	case fields["window"] != nil:
		if w.ID.SpanUs, err = parseSpan(fields["window"].Value); err != nil {
			return w, false, false, err
		}
	default:
		w.ID.SpanUs = p.defaultSpanUs
	}
	if f := fields["currency"]; f != nil {
		if !currencyRE.MatchString(f.Value) {
			return w, false, false, fmt.Errorf("currency: %q", f.Value)
		}
		w.ID.Currency = f.Value
	}
	if f := fields["reserve"]; f != nil {
		if !channelWide {
			return w, false, false, fmt.Errorf("reserve is for channel-wide keys only")
		}
		if err := f.Decode(&w.Reserve); err != nil {
			return w, false, false, fmt.Errorf("reserve: %w", err)
		}
		var sum int64
		for name, n := range w.Reserve {
			if !codeRE.MatchString(name) || n < 0 {
				return w, false, false, fmt.Errorf("reserve: %s: %d", name, n)
			}
			sum += n
		}
		if sum > w.Limit {
			return w, false, false, fmt.Errorf("reserve: the reservations sum to more than the limit %d", w.Limit)
		}
	}
	w.PerMerchant = -1
	if f := fields["perMerchant"]; f != nil {
		if w.PerMerchant, err = parseInt(f); err != nil || w.PerMerchant < 0 {
			return w, false, false, fmt.Errorf("perMerchant: %q, want a limit of at least 0", f.Value)
		}
		w.HasMerchants = true
	}
	if f := fields["merchants"]; f != nil {
		if err := f.Decode(&w.Merchants); err != nil {
			return w, false, false, fmt.Errorf("merchants: %w", err)
		}
		for m, n := range w.Merchants {
			if m == "" || n < -1 {
				return w, false, false, fmt.Errorf("merchants: %q: %d", m, n)
			}
		}
		w.HasMerchants = true
	}
	return w, shadow, false, nil
}

func negative(v int64) error {
	if v == -1 {
		return nil
	}
	return fmt.Errorf("%d: want -1 (unlimited), 0 (closed) or a positive limit", v)
}

func safeIndex(m []string, i int) string {
	if i < len(m) {
		return m[i]
	}
	return ""
}

// fieldsOf reads a mapping whose keys must be among allowed.
func fieldsOf(n *yaml.Node, allowed ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("want a mapping")
	}
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		known := false
		for _, a := range allowed {
			known = known || a == k
		}
		if !known {
			return nil, fmt.Errorf("unknown field %q (want %s)", k, strings.Join(allowed, ", "))
		}
		if out[k] != nil {
			return nil, fmt.Errorf("field %q written twice", k)
		}
		out[k] = n.Content[i+1]
	}
	return out, nil
}

func parseInt(n *yaml.Node) (int64, error) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "") {
		return 0, fmt.Errorf("%q is not a whole number", n.Value)
	}
	return strconv.ParseInt(n.Value, 10, 64)
}

func parseSpan(s string) (int64, error) {
	m := durationRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a window such as 1s", s)
	}
	v, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%q is not a window such as 1s", s)
	}
	return v * unitUs[m[2]], nil
}

func loadZone(name string) (*time.Location, error) {
	if name == "Local" || name == "" {
		return nil, fmt.Errorf("zone %q: want an IANA name", name)
	}
	return time.LoadLocation(name)
}

func checkKey(key string) error {
	biz, ch, ok := strings.Cut(key, ":")
	if !ok || (biz != "*" && !codeRE.MatchString(biz)) || !codeRE.MatchString(ch) {
		return fmt.Errorf("bad key %q: want BIZTYPE:CHANNEL or *:CHANNEL", key)
	}
	return nil
}

func isChannelWide(key string) bool { return strings.HasPrefix(key, "*:") }

// ruleAt is the rule of key at t: its schedule's while one is in force,
// else the key's own; absent (unlimited) when neither exists.
func (d *Document) ruleAt(key string, tUs int64) (Rule, scheduleRef) {
	for _, s := range d.Schedules {
		if s.Key == key && s.FromUs <= tUs && tUs < s.ToUs {
			return s.Rule, scheduleRef(s.position + 1)
		}
	}
	return d.Keys[key], 0
}

// scheduleRef names which of a key's rules is meant: 0 the key's own, n the
// document's n-th schedule.
type scheduleRef int

// hasWindow says whether any rule of key in the document (its own or a
// schedule's) has a window with this id.
func (d *Document) hasWindow(key string, id WindowID) bool {
	key, merchant, isMerchant := splitMerchantKey(key)
	rules := []Rule{d.Keys[key]}
	for _, s := range d.Schedules {
		if s.Key == key {
			rules = append(rules, s.Rule)
		}
	}
	for _, r := range rules {
		for _, w := range r.Windows {
			if w.ID == id && (!isMerchant || w.HasMerchants && w.merchantLimit(merchant) != -1) {
				return true
			}
		}
	}
	return false
}

// maxLimit is the highest limit of the window with this id among the
// key's rules in the document (its own and its schedules'); 0 when none
// has that window.
func (d *Document) maxLimit(key string, id WindowID) int64 {
	key, merchant, isMerchant := splitMerchantKey(key)
	rules := []Rule{d.Keys[key]}
	for _, s := range d.Schedules {
		if s.Key == key {
			rules = append(rules, s.Rule)
		}
	}
	var most int64
	for _, r := range rules {
		for _, w := range r.Windows {
			switch {
			case w.ID != id:
			case !isMerchant:
				most = max(most, w.Limit)
			case w.HasMerchants && w.merchantLimit(merchant) != -1:
				most = max(most, w.merchantLimit(merchant))
			}
		}
	}
	return most
}

// keysOf lists the document's keys, sorted, schedules' keys included.
func (d *Document) keysOf() []string {
	set := map[string]bool{}
	for k := range d.Keys {
		set[k] = true
	}
	for _, s := range d.Schedules {
		set[s.Key] = true
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
