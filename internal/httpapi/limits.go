package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/configcenter"
	"payserver/internal/limits"
	"payserver/internal/ratelimit"
)

// LimitsView is what GET /limits shows: the limits in force, where they
// came from, and (through UsageSource) what each window holds now.
type LimitsView interface {
	UsageSource
	Status() configcenter.Status
	Degraded() bool
	// Routes returns the routes of the document in force; nil before the
	// first document and for a document without routes.
	Routes() limits.Routes
}

// OutageView says what the limiter's shared store may not hold after an
// outage. *ratelimit.Limiter gives DecidedInProcess; payserver adds when
// Redis last restarted.
type OutageView interface {
	// DecidedInProcess returns, for each window of rule on key, the use by
	// admissions this instance decided in process while the shared store
	// failed, still in the window (ratelimit.Limiter.DecidedInProcess).
	DecidedInProcess(key ratelimit.Key, rule ratelimit.Rule) []int64
	// StoreRestartedAt returns when the shared store was last seen to
	// restart (or fail over) and lose what it held; zero if never.
	StoreRestartedAt(ctx context.Context) time.Time
}

// WindowNow is one window of a key's rule in force, with what it holds now.
type WindowNow struct {
	WindowJSON
	// Used is what the window holds now (admissions, or amount in minor
	// units); nil when it could not be read.
	Used *int64 `json:"used"`
	// UsedMajor is Used in major units of the window's currency, on an
	// amount window with a currency whose use was read.
	UsedMajor *string `json:"usedMajor,omitempty"`
	// InProcess is the use by admissions this instance decided in
	// process while Redis failed, still in the window (in a calendar
	// window, since its period began): Used leaves them out. Absent when
	// not known.
	InProcess *int64 `json:"inProcess,omitempty"`
	// InProcessMajor is InProcess in major units, as UsedMajor.
	InProcessMajor *string `json:"inProcessMajor,omitempty"`
	// RedisRestartedAt, on a calendar window, is when Redis was seen to
	// restart (or fail over) within the window's current period: Used may
	// miss admissions made before then. Absent otherwise.
	RedisRestartedAt *string `json:"redisRestartedAt,omitempty"`
	// learnedJSON is the window's learned limit, when one is in force.
	learnedJSON
}

// OutageJSON is what an outage may have hidden from windows' use.
type OutageJSON struct {
	view OutageView
	// restartedAt is OutageView.StoreRestartedAt, read once per answer.
	restartedAt time.Time
}

// mark adds to wn, window w at now, what the outage view
// knows.
func (o *OutageJSON) mark(wn *WindowNow, w ratelimit.Window, inProcess int64, now time.Time) {
	n := inProcess
	wn.InProcess = &n
	wn.InProcessMajor = wn.Major(n)
	if w.IsCalendar() && !o.restartedAt.IsZero() {
		if start, _ := w.Calendar.Period(now); !o.restartedAt.Before(start) {
			at := formatInstant(o.restartedAt.UTC())
			wn.RedisRestartedAt = &at
		}
	}
}

// scheduleRef names a schedule by its span.
type scheduleRef struct {
	From string `json:"from"`
	To   string `json:"to"`
}

type LimitJSON struct {
	Key         string `json:"key"`
	BizType     string `json:"bizType"`
	Channel     string `json:"channel"`
	ChannelWide bool   `json:"channelWide"`
	// InDocument is false for a key only schedules name: unlimited
	// outside them.
	InDocument bool        `json:"inDocument"`
	Unlimited  bool        `json:"unlimited"`
	Closed     bool        `json:"closed"`
	Shadow     bool        `json:"shadow"`
	Windows    []WindowNow `json:"windows"`
	Rule       string      `json:"rule"`
	// Schedule is the schedule in force now; nil when the key's own rule
	// is.
	Schedule *scheduleRef `json:"schedule"`
	// NextChange is the next schedule boundary of the key; nil when none
	// is ahead.
	NextChange *string `json:"nextChange"`
	// UsageError says why the windows' use could not be read; "" when it
	// was (or the key is unlimited).
	UsageError string `json:"usageError"`
	// LearnedError says why the learned limits could not be read; absent
	// when they were, or when no window of the key learns.
	LearnedError string `json:"learnedError,omitempty"`
}

// scheduleJSON is one schedule of the document.
type scheduleJSON struct {
	Key string `json:"key"`
	scheduleRef
	// State is "active", "upcoming" or "past" (kept in the document,
	// ignored).
	State     string       `json:"state"`
	Unlimited bool         `json:"unlimited"`
	Closed    bool         `json:"closed"`
	Rule      string       `json:"rule"`
	Windows   []WindowJSON `json:"windows"`
}

func formatInstant(t time.Time) string { return t.Format(time.RFC3339) }

// limitKeys returns every key of cfg's rules and schedules, sorted
// (sortKeys).
func limitKeys(cfg *ratelimit.Config) []ratelimit.Key {
	keys := make([]ratelimit.Key, 0, len(cfg.Rules))
	for k := range cfg.Rules {
		keys = append(keys, k)
	}
	onlyScheduled := map[ratelimit.Key]bool{}
	for _, s := range cfg.Schedules {
		if _, ok := cfg.Rules[s.Key]; !ok && !onlyScheduled[s.Key] {
			onlyScheduled[s.Key] = true
			keys = append(keys, s.Key)
		}
	}
	SortKeys(keys)
	return keys
}

// SortKeys sorts keys by their text, BIZTYPE:CHANNEL, byte by byte: the
// order every admin answer lists keys in ("*:CHANNEL" first).
func SortKeys(keys []ratelimit.Key) {
	type named struct {
		name string
		key  ratelimit.Key
	}
	all := make([]named, len(keys))
	for i, k := range keys {
		all[i] = named{k.String(), k}
	}
	slices.SortFunc(all, func(a, b named) int { return strings.Compare(a.name, b.name) })
	for i, n := range all {
		keys[i] = n.key
	}
}

// LimitsJSON describes each key's rule in force at now with the use of its
// windows (reads, parallel to keys; nil when the use was not read) and
// their learned limits (learned, parallel to keys; nil when not read).
func LimitsJSON(cfg *ratelimit.Config, keys []ratelimit.Key, reads []ratelimit.KeyUsage, learned []ratelimit.KeyLearned, outage *OutageJSON, now time.Time) []LimitJSON {
	out := make([]LimitJSON, 0, len(keys))
	var texts ruleTexts
	for i, k := range keys {
		r := cfg.RuleAt(k, now)
		_, inDoc := cfg.Rules[k]
		windows := DescribeWindows(r)
		l := LimitJSON{
			Key: k.String(), BizType: k.BizType, Channel: k.Channel, ChannelWide: k.IsChannelWide(), InDocument: inDoc,
			Unlimited: r.IsUnlimited(), Closed: r.IsClosed(), Shadow: r.Shadow,
			Windows: make([]WindowNow, len(windows)), Rule: texts.describe(r),
		}
		for _, s := range cfg.Schedules {
			if s.Key == k && s.Active(now) {
				l.Schedule = &scheduleRef{From: formatInstant(s.From), To: formatInstant(s.To)}
			}
		}
		if next := cfg.NextChange(k, now); !next.IsZero() {
			at := formatInstant(next)
			l.NextChange = &at
		}
		var read ratelimit.KeyUsage
		sameRule := false
		if reads != nil {
			read = reads[i]
			// The store answers for the rule in force when it read; show
			// its counts only if that is the rule described here.
			sameRule = describedAlike(read.Rule, r)
		}
		var lr ratelimit.KeyLearned
		if learned != nil {
			lr = learned[i]
		}
		var inProcess []int64
		if outage != nil {
			inProcess = outage.view.DecidedInProcess(k, r)
		}
		for j, w := range windows {
			wn := WindowNow{WindowJSON: w}
			if read.Err == nil && sameRule && j < len(read.Counts) {
				n := read.Counts[j]
				wn.Used = &n
				wn.UsedMajor = w.Major(n)
			}
			if j < len(inProcess) {
				outage.mark(&wn, r.Windows[j], inProcess[j], now)
			}
			if ll, ok := learnedFor(lr.Limits, r.Windows[j]); ok && lr.Err == nil {
				wn.learnedJSON = newLearnedJSON(ll, now)
				if j < len(r.Reserve) {
					wn.ReserveInForce = ratelimit.ReservationsInForce(r.Reserve[j], ll.Limit)
				}
			}
			l.Windows[j] = wn
		}
		if lr.Err != nil {
			l.LearnedError = "could not read the learned limits from the limiter store: " + lr.Err.Error()
		}
		switch {
		case reads == nil:
		case read.Err != nil:
			l.UsageError = "could not read the window use from the limiter store: " + read.Err.Error()
		case !sameRule:
			l.UsageError = "the rule changed while its use was read; ask again"
		}
		out = append(out, l)
	}
	return out
}

// ruleTexts describes rules as configcenter.DescribeRule does, remembering
// the last rule described: keys next to each other often share their rule.
type ruleTexts struct {
	last ratelimit.Rule
	text string
}

func (t *ruleTexts) describe(r ratelimit.Rule) string {
	if t.text == "" || !plainlyEqual(t.last, r) {
		t.last, t.text = r, configcenter.DescribeRule(r, true)
	}
	return t.text
}

// describedAlike reports whether configcenter.DescribeRule describes a and
// b alike, without describing them when they are plainly equal.
func describedAlike(a, b ratelimit.Rule) bool {
	return plainlyEqual(a, b) || configcenter.DescribeRule(a, true) == configcenter.DescribeRule(b, true)
}

// plainlyEqual reports whether a and b have equal windows and shadow flags
// and neither has reservations or merchant limits, so that they are
// described alike.
func plainlyEqual(a, b ratelimit.Rule) bool {
	return a.Shadow == b.Shadow && !reserves(a) && !reserves(b) && a.Merchants == nil && b.Merchants == nil && slices.Equal(a.Windows, b.Windows)
}

// reserves reports whether some window of r keeps part of its limit for
// named bizTypes.
func reserves(r ratelimit.Rule) bool {
	for _, m := range r.Reserve {
		if len(m) > 0 {
			return true
		}
	}
	return false
}

// schedulesJSON describes every schedule, with its state at now.
func schedulesJSON(cfg *ratelimit.Config, now time.Time) []scheduleJSON {
	out := make([]scheduleJSON, 0, len(cfg.Schedules))
	for _, s := range cfg.Schedules {
		out = append(out, scheduleJSON{
			Key: s.Key.String(), scheduleRef: scheduleRef{From: formatInstant(s.From), To: formatInstant(s.To)},
			State: s.StateAt(now), Unlimited: s.Rule.IsUnlimited(), Closed: s.Rule.IsClosed(),
			Rule: configcenter.DescribeRule(s.Rule, true), Windows: DescribeWindows(s.Rule),
		})
	}
	return out
}

func timeOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// getLimits answers GET /limits: the document in force, each key's rule in
// force now (schedules applied) with what its windows hold, and every
// schedule. With limit or after (limitsPage) it lists one page of the keys,
// and only those are read from the limiter's store.
func (h *handler) getLimits(c *gin.Context) {
	page, err := ParseLimitsPage(c.Request.URL.Query())
	if err != nil {
		WriteError(c, h.log, err, "")
		return
	}
	cfg := h.opts.Limits.Config()
	st := h.opts.Limits.Status()
	body := gin.H{
		"loaded":   st.Loaded,
		"source":   st.Source,
		"name":     st.Name,
		"describe": st.Describe,
		"md5":      st.MD5,
		"loadedAt": timeOrNil(st.LoadedAt),
		"applied":  st.Applied,
		"refusals": st.Refusals,
		"lastRefusal": gin.H{
			"error":      st.LastRefusal,
			"at":         timeOrNil(st.LastRefusalAt),
			"superseded": st.LastRefusalSuperseded,
		},
		"limiterDegraded": h.opts.Limits.Degraded(),
		"missingKeyMeans": "unlimited",
		"limits":          []LimitJSON{},
		"total":           0,
		"next":            nil,
	}
	if cfg != nil {
		now := h.now()
		all := limitKeys(cfg)
		keys, next := page.Of(all)
		reads := ReadUsage(c.Request.Context(), h.opts.Limits, keys)
		learned := ReadLearned(c.Request.Context(), h.opts.Learned, cfg, keys)
		var outage *OutageJSON
		if h.opts.Outage != nil {
			outage = &OutageJSON{view: h.opts.Outage, restartedAt: h.opts.Outage.StoreRestartedAt(c.Request.Context())}
			body["redisRestartedAt"] = timeOrNil(outage.restartedAt)
		}
		body["limits"] = LimitsJSON(cfg, keys, reads, learned, outage, now)
		body["total"] = len(all)
		if next != nil {
			body["next"] = *next
		}
		body["schedules"] = schedulesJSON(cfg, now)
		body["defaultWindow"] = configcenter.FormatWindow(cfg.DefaultWindow)
		body["zone"] = cfg.Zone.String()
		body["shadowAll"] = cfg.Shadow
		body["routes"] = routesJSON(h.opts.Limits.Routes())
		body["at"] = now.UTC().Format(time.RFC3339Nano)
	}
	c.Header("Cache-Control", "no-store")
	WriteJSON(c, h.log, http.StatusOK, body)
}

// routesJSON is the routes in force for GET /limits: bizType to its
// candidates in order of preference; {} when there are none.
func routesJSON(r limits.Routes) map[string][]string {
	out := make(map[string][]string, len(r))
	for biz, cands := range r {
		out[biz] = cands
	}
	return out
}
