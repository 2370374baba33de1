package emulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Behaviour is how one emulated channel misbehaves. It is an immutable
// snapshot: the admin endpoint validates a Patch into a new Behaviour and
// swaps it in whole, so a call in flight sees one consistent Behaviour.
//
// The rates are probabilities in [0, 1], rolled independently in the
// order of a call's life (see the package doc): each applies to the calls
// that got past the steps before it.
//
// The zero value answers every call at once and correctly; its holds end
// at once (Hold 0) and its PROCESSING answers are decided at once
// (Processing 0). DefaultBehaviour is what a channel starts with.
type Behaviour struct {
	// Latency is how long a call waits between being received (after any
	// pause) and being decided; its answer goes out right after the
	// decision. The caller leaving does not stop it: a call whose client
	// gave up is still decided, as at a real channel.
	Latency Latency
	// DeclineRate is the share of new payments declined
	// (INSUFFICIENT_FUNDS); the rest succeed.
	DeclineRate float64
	// ProcessingRate is the share of new payments answered PROCESSING:
	// their outcome (rolled at once, so the books know whether money
	// moved) is revealed after Processing; until then replays and queries
	// answer PROCESSING.
	ProcessingRate float64
	Processing     time.Duration
	// LostAnswerRate is the share of calls decided (and written to the
	// books) whose answer is never sent: the connection is held for Hold,
	// or until the client gives up, then closed.
	LostAnswerRate float64
	// DropRate is the share of calls never decided: held like a lost
	// answer, then closed. The order is not processed.
	DropRate float64
	// RefuseRate is the share of calls whose connection is reset as soon
	// as they arrive: never processed, no answer.
	RefuseRate float64
	// ErrorRate is the share of calls answered 503 without being processed.
	ErrorRate float64
	// Hold is how long a lost answer or a dropped call keeps the
	// connection open without a byte before closing it.
	Hold time.Duration
	// ThrottleCapacity is how many payments the channel processes within
	// any ThrottleWindow; a new payment past it is answered THROTTLED.
	// Unlimited (0) means no limit.
	ThrottleCapacity int
	ThrottleWindow   time.Duration
	// Notify turns on asynchronous notifications of final outcomes (when
	// the emulator has a notify URL). Each is sent NotifyDelay after the
	// outcome is revealed, with NotifyDuplicates extra copies; with
	// NotifyReorder every copy waits a random time instead (uniform in
	// [0, 2×NotifyDelay], or [0, 100 ms] when NotifyDelay is 0), so copies
	// and notifications of different orders overtake each other.
	Notify           bool
	NotifyDelay      time.Duration
	NotifyDuplicates int
	NotifyReorder    bool
	// NotifyRetries is the schedule on which a notification copy is sent
	// again until payserver answers 2xx: the wait before each retry, in
	// order; after the last the copy is given up. A 400, 401 or 403 is not
	// retried. Default WeChatNotifyRetries. Never modified in place.
	NotifyRetries []time.Duration
	// CloseAfter is the earliest close of an order after the channel first
	// received a pay of it (WeChat Pay's is 5 minutes: an order cannot be
	// closed sooner). An earlier close is refused with 409 and
	// CloseTooSoonCode, and changes nothing. 0 allows a close at once.
	CloseAfter       time.Duration
	CloseTooSoonCode string
}

// WeChatNotifyRetries is WeChat Pay's published schedule for repeating a
// payment notification the merchant did not acknowledge: 15 s, 15 s,
// 30 s, 3 m, 10 m, 20 m, 30 m, 30 m, 30 m, 60 m, 3 h, 3 h, 3 h, 6 h, 6 h.
var WeChatNotifyRetries = []time.Duration{
	15 * time.Second, 15 * time.Second, 30 * time.Second, 3 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, 30 * time.Minute, 30 * time.Minute, time.Hour,
	3 * time.Hour, 3 * time.Hour, 3 * time.Hour, 6 * time.Hour, 6 * time.Hour,
}

// maxNotifyRetries bounds a notifyRetriesMs schedule's length; each wait
// is at most a day.
const maxNotifyRetries = 30

// Unlimited is the ThrottleCapacity of a channel without a throttle.
const Unlimited = 0

// Bounds of the admin fields.
const (
	maxMs         = int64(time.Hour / time.Millisecond) // any duration field
	maxCapacity   = 1_000_000
	maxDuplicates = 100
	// reorderSpread is the random wait of a reordered notification when
	// NotifyDelay is 0.
	reorderSpread = 100 * time.Millisecond
)

// DefaultBehaviour is a well-behaved channel: no latency, no faults, no
// throttle; PROCESSING (once a ProcessingRate is set) lasts one second,
// holds last 30 seconds, a throttle's window is one second, no
// notifications (retried on WeChat Pay's schedule), a close allowed at once (refused as CLOSE_TOO_SOON once
// a CloseAfter is set).
func DefaultBehaviour() Behaviour {
	return Behaviour{
		Processing:       time.Second,
		Hold:             30 * time.Second,
		ThrottleWindow:   time.Second,
		NotifyRetries:    WeChatNotifyRetries,
		CloseTooSoonCode: "CLOSE_TOO_SOON",
	}
}

// Latency is a wait drawn uniformly from [Min, Max]; Min == Max is a
// fixed wait, the zero value none.
type Latency struct {
	Min, Max time.Duration
}

// draw maps u in [0, 1) onto [Min, Max].
func (l Latency) draw(u float64) time.Duration {
	if l.Max <= l.Min {
		return l.Min
	}
	return l.Min + time.Duration(u*float64(l.Max-l.Min+1))
}

// Patch is a change to a Behaviour, as the admin endpoint or the
// -behaviour flag take it: nil fields are left as they are. Pause is not
// part of a Behaviour: it pauses the channel for that long from now (0
// ends a pause).
type Patch struct {
	Latency          *Latency
	DeclineRate      *float64
	ProcessingRate   *float64
	Processing       *time.Duration
	LostAnswerRate   *float64
	DropRate         *float64
	RefuseRate       *float64
	ErrorRate        *float64
	Hold             *time.Duration
	ThrottleCapacity *int
	ThrottleWindow   *time.Duration
	Pause            *time.Duration
	Notify           *bool
	NotifyDelay      *time.Duration
	NotifyDuplicates *int
	NotifyReorder    *bool
	NotifyRetries    *[]time.Duration
	CloseAfter       *time.Duration
	CloseTooSoonCode *string
}

// FieldError is a Patch field that is unknown or has a bad value.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// ParsePatch reads the admin endpoint's JSON object: each field optional,
// unknown fields refused. The error is a *FieldError naming the first bad
// field (in alphabetical order), or a plain error when data is not a JSON
// object.
func ParsePatch(data []byte) (Patch, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return Patch{}, fmt.Errorf("not a JSON object: %w", err)
	}
	if fields == nil {
		return Patch{}, errors.New("not a JSON object")
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	var p Patch
	for _, name := range names {
		if err := p.set(name, fields[name]); err != nil {
			return Patch{}, &FieldError{Field: name, Err: err}
		}
	}
	return p, nil
}

func (p *Patch) set(name string, raw json.RawMessage) error {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return errors.New("null (leave the field out to keep it)")
	}
	var err error
	switch name {
	case "latencyMs":
		p.Latency, err = parseLatency(raw)
	case "declineRate":
		p.DeclineRate, err = parseRate(raw)
	case "processingRate":
		p.ProcessingRate, err = parseRate(raw)
	case "processingMs":
		p.Processing, err = parseMs(raw, 0)
	case "lostAnswerRate":
		p.LostAnswerRate, err = parseRate(raw)
	case "dropRate":
		p.DropRate, err = parseRate(raw)
	case "refuseRate":
		p.RefuseRate, err = parseRate(raw)
	case "errorRate":
		p.ErrorRate, err = parseRate(raw)
	case "holdMs":
		p.Hold, err = parseMs(raw, 0)
	case "throttleCapacity":
		p.ThrottleCapacity, err = parseCount(raw, maxCapacity)
	case "throttleWindowMs":
		p.ThrottleWindow, err = parseMs(raw, 1)
	case "pauseMs":
		p.Pause, err = parseMs(raw, 0)
	case "notify":
		p.Notify, err = parseBool(raw)
	case "notifyDelayMs":
		p.NotifyDelay, err = parseMs(raw, 0)
	case "notifyDuplicates":
		p.NotifyDuplicates, err = parseCount(raw, maxDuplicates)
	case "notifyReorder":
		p.NotifyReorder, err = parseBool(raw)
	case "notifyRetriesMs":
		p.NotifyRetries, err = parseSchedule(raw)
	case "closeAfterMs":
		p.CloseAfter, err = parseMs(raw, 0)
	case "closeTooSoonCode":
		p.CloseTooSoonCode, err = parseErrorCode(raw)
	default:
		return errors.New("unknown field")
	}
	return err
}

func parseRate(raw json.RawMessage) (*float64, error) {
	var r float64
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, errors.New("not a number")
	}
	if math.IsNaN(r) || r < 0 || r > 1 {
		return nil, fmt.Errorf("%v outside [0, 1]", r)
	}
	return &r, nil
}

func parseMs(raw json.RawMessage, lowest int64) (*time.Duration, error) {
	var ms int64
	if err := json.Unmarshal(raw, &ms); err != nil {
		return nil, errors.New("not a whole number of milliseconds")
	}
	if ms < lowest || ms > maxMs {
		return nil, fmt.Errorf("%d outside [%d, %d] ms", ms, lowest, maxMs)
	}
	d := time.Duration(ms) * time.Millisecond
	return &d, nil
}

func parseCount(raw json.RawMessage, highest int) (*int, error) {
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, errors.New("not a whole number")
	}
	if n < 0 || n > highest {
		return nil, fmt.Errorf("%d outside [0, %d]", n, highest)
	}
	return &n, nil
}

// parseSchedule takes a list of waits in ms, each in [1 ms, 24 h], at
// most maxNotifyRetries of them.
func parseSchedule(raw json.RawMessage) (*[]time.Duration, error) {
	var ms []int64
	if err := json.Unmarshal(raw, &ms); err != nil {
		return nil, errors.New("not a list of whole numbers of milliseconds")
	}
	s := make([]time.Duration, len(ms))
	for i, m := range ms {
		s[i] = time.Duration(m) * time.Millisecond
	}
	if err := checkSchedule(s); err != nil {
		return nil, err
	}
	return &s, nil
}

func checkSchedule(s []time.Duration) error {
	if len(s) > maxNotifyRetries {
		return fmt.Errorf("%d retries, at most %d", len(s), maxNotifyRetries)
	}
	for _, d := range s {
		if d < time.Millisecond || d > 24*time.Hour {
			return fmt.Errorf("%v outside [1ms, 24h]", d)
		}
	}
	return nil
}

// parseErrorCode takes a channel error code: 1 to 64 upper-case letters,
// digits, '_' or '.'.
func parseErrorCode(raw json.RawMessage) (*string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, errors.New("not a string")
	}
	if !validErrorCode(s) {
		return nil, fmt.Errorf("%q: want 1 to 64 upper-case letters, digits, '_' or '.'", s)
	}
	return &s, nil
}

func validErrorCode(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func parseBool(raw json.RawMessage) (*bool, error) {
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, errors.New("not true or false")
	}
	return &b, nil
}

// parseLatency takes a number of milliseconds (a fixed latency) or
// {"min": ms, "max": ms} (uniform).
func parseLatency(raw json.RawMessage) (*Latency, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		var r struct {
			Min *int64 `json:"min"`
			Max *int64 `json:"max"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil || r.Min == nil || r.Max == nil {
			return nil, errors.New(`want a number of ms or {"min": ms, "max": ms}`)
		}
		if *r.Min < 0 || *r.Max > maxMs || *r.Min > *r.Max {
			return nil, fmt.Errorf("min %d and max %d must satisfy 0 <= min <= max <= %d", *r.Min, *r.Max, maxMs)
		}
		return &Latency{Min: time.Duration(*r.Min) * time.Millisecond, Max: time.Duration(*r.Max) * time.Millisecond}, nil
	}
	d, err := parseMs(raw, 0)
	if err != nil {
		return nil, fmt.Errorf(`%w (or {"min": ms, "max": ms})`, err)
	}
	return &Latency{Min: *d, Max: *d}, nil
}

// With returns b changed by p. Every value in p was checked by ParsePatch;
// With checks them again for a Patch built in Go.
func (b Behaviour) With(p Patch) (Behaviour, error) {
	rates := []struct {
		name string
		from *float64
		to   *float64
	}{
		{"declineRate", p.DeclineRate, &b.DeclineRate},
		{"processingRate", p.ProcessingRate, &b.ProcessingRate},
		{"lostAnswerRate", p.LostAnswerRate, &b.LostAnswerRate},
		{"dropRate", p.DropRate, &b.DropRate},
		{"refuseRate", p.RefuseRate, &b.RefuseRate},
		{"errorRate", p.ErrorRate, &b.ErrorRate},
	}
	for _, r := range rates {
		if r.from == nil {
			continue
		}
		if math.IsNaN(*r.from) || *r.from < 0 || *r.from > 1 {
			return b, &FieldError{Field: r.name, Err: fmt.Errorf("%v outside [0, 1]", *r.from)}
		}
		*r.to = *r.from
	}
	durations := []struct {
		name   string
		lowest time.Duration
		from   *time.Duration
		to     *time.Duration
	}{
		{"processingMs", 0, p.Processing, &b.Processing},
		{"holdMs", 0, p.Hold, &b.Hold},
		{"throttleWindowMs", time.Millisecond, p.ThrottleWindow, &b.ThrottleWindow},
		{"notifyDelayMs", 0, p.NotifyDelay, &b.NotifyDelay},
		{"closeAfterMs", 0, p.CloseAfter, &b.CloseAfter},
	}
	for _, d := range durations {
		if d.from == nil {
			continue
		}
		if *d.from < d.lowest || *d.from > time.Duration(maxMs)*time.Millisecond {
			return b, &FieldError{Field: d.name, Err: fmt.Errorf("%v outside [%v, 1h]", *d.from, d.lowest)}
		}
		*d.to = *d.from
	}
	if l := p.Latency; l != nil {
		if l.Min < 0 || l.Min > l.Max || l.Max > time.Duration(maxMs)*time.Millisecond {
			return b, &FieldError{Field: "latencyMs", Err: fmt.Errorf("min %v and max %v must satisfy 0 <= min <= max <= 1h", l.Min, l.Max)}
		}
		b.Latency = *l
	}
	if c := p.ThrottleCapacity; c != nil {
		if *c < 0 || *c > maxCapacity {
			return b, &FieldError{Field: "throttleCapacity", Err: fmt.Errorf("%d outside [0, %d]", *c, maxCapacity)}
		}
		b.ThrottleCapacity = *c
	}
	if n := p.NotifyDuplicates; n != nil {
		if *n < 0 || *n > maxDuplicates {
			return b, &FieldError{Field: "notifyDuplicates", Err: fmt.Errorf("%d outside [0, %d]", *n, maxDuplicates)}
		}
		b.NotifyDuplicates = *n
	}
	if p.Notify != nil {
		b.Notify = *p.Notify
	}
	if p.NotifyReorder != nil {
		b.NotifyReorder = *p.NotifyReorder
	}
	if s := p.NotifyRetries; s != nil {
		if err := checkSchedule(*s); err != nil {
			return b, &FieldError{Field: "notifyRetriesMs", Err: err}
		}
		b.NotifyRetries = slices.Clone(*s)
	}
	if c := p.CloseTooSoonCode; c != nil {
		if !validErrorCode(*c) {
			return b, &FieldError{Field: "closeTooSoonCode", Err: fmt.Errorf("%q: want 1 to 64 upper-case letters, digits, '_' or '.'", *c)}
		}
		b.CloseTooSoonCode = *c
	}
	return b, nil
}

// behaviourJSON is a Behaviour as the admin endpoint shows it: the fields
// ParsePatch takes, so a GET's answer can be posted back.
type behaviourJSON struct {
	LatencyMs        any     `json:"latencyMs"`
	DeclineRate      float64 `json:"declineRate"`
	ProcessingRate   float64 `json:"processingRate"`
	ProcessingMs     int64   `json:"processingMs"`
	LostAnswerRate   float64 `json:"lostAnswerRate"`
	DropRate         float64 `json:"dropRate"`
	RefuseRate       float64 `json:"refuseRate"`
	ErrorRate        float64 `json:"errorRate"`
	HoldMs           int64   `json:"holdMs"`
	ThrottleCapacity int     `json:"throttleCapacity"`
	ThrottleWindowMs int64   `json:"throttleWindowMs"`
	PauseMs          int64   `json:"pauseMs"`
	Notify           bool    `json:"notify"`
	NotifyDelayMs    int64   `json:"notifyDelayMs"`
	NotifyDuplicates int     `json:"notifyDuplicates"`
	NotifyReorder    bool    `json:"notifyReorder"`
	NotifyRetriesMs  []int64 `json:"notifyRetriesMs"`
	CloseAfterMs     int64   `json:"closeAfterMs"`
	CloseTooSoonCode string  `json:"closeTooSoonCode"`
}

// view is b as the admin endpoint shows it, with the pause left.
func (b Behaviour) view(pauseLeft time.Duration) behaviourJSON {
	var latency any = b.Latency.Min.Milliseconds()
	if b.Latency.Max != b.Latency.Min {
		latency = map[string]int64{"min": b.Latency.Min.Milliseconds(), "max": b.Latency.Max.Milliseconds()}
	}
	retriesMs := make([]int64, len(b.NotifyRetries))
	for i, d := range b.NotifyRetries {
		retriesMs[i] = d.Milliseconds()
	}
	return behaviourJSON{
		LatencyMs:        latency,
		DeclineRate:      b.DeclineRate,
		ProcessingRate:   b.ProcessingRate,
		ProcessingMs:     b.Processing.Milliseconds(),
		LostAnswerRate:   b.LostAnswerRate,
		DropRate:         b.DropRate,
		RefuseRate:       b.RefuseRate,
		ErrorRate:        b.ErrorRate,
		HoldMs:           b.Hold.Milliseconds(),
		ThrottleCapacity: b.ThrottleCapacity,
		ThrottleWindowMs: b.ThrottleWindow.Milliseconds(),
		PauseMs:          (pauseLeft + time.Millisecond - 1).Milliseconds(),
		Notify:           b.Notify,
		NotifyDelayMs:    b.NotifyDelay.Milliseconds(),
		NotifyDuplicates: b.NotifyDuplicates,
		NotifyReorder:    b.NotifyReorder,
		NotifyRetriesMs:  retriesMs,
		CloseAfterMs:     b.CloseAfter.Milliseconds(),
		CloseTooSoonCode: b.CloseTooSoonCode,
	}
}

// ChannelPatch is a Patch for one channel, as given at start.
type ChannelPatch struct {
	Channel string
	Patch   Patch
}

// ParseChannelPatch reads a -behaviour flag: CODE=JSON, the JSON as the
// admin endpoint takes it, e.g. ALIPAY={"declineRate":0.1}.
func ParseChannelPatch(arg string) (ChannelPatch, error) {
	code, body, ok := strings.Cut(arg, "=")
	if !ok || code == "" {
		return ChannelPatch{}, fmt.Errorf("behaviour %q: want CODE={json}", arg)
	}
	p, err := ParsePatch([]byte(body))
	if err != nil {
		return ChannelPatch{}, fmt.Errorf("behaviour of %s: %w", code, err)
	}
	return ChannelPatch{Channel: code, Patch: p}, nil
}
