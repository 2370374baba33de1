package httpapi

import (
	"net/http"
	"sort"
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

// windowNow is one window of a key's rule in force, with what it holds now.
type windowNow struct {
	windowJSON
	// Used is what the window holds now (admissions, or amount in minor
	// units); nil when it could not be read.
	Used *int64 `json:"used"`
	// learnedJSON is the window's learned limit, when one is in force.
	learnedJSON
}

// scheduleRef names a schedule by its span.
type scheduleRef struct {
	From string `json:"from"`
	To   string `json:"to"`
}

type limitJSON struct {
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
	Windows    []windowNow `json:"windows"`
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
	Windows   []windowJSON `json:"windows"`
}

func formatInstant(t time.Time) string { return t.Format(time.RFC3339) }

// limitKeys returns every key of cfg's rules and schedules, sorted.
func limitKeys(cfg *ratelimit.Config) []ratelimit.Key {
	seen := map[ratelimit.Key]bool{}
	keys := make([]ratelimit.Key, 0, len(cfg.Rules))
	for k := range cfg.Rules {
		seen[k] = true
		keys = append(keys, k)
	}
	for _, s := range cfg.Schedules {
		if !seen[s.Key] {
			seen[s.Key] = true
			keys = append(keys, s.Key)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// limitsJSON describes each key's rule in force at now with the use of its
// windows (reads, parallel to keys; nil when the use was not read) and
// their learned limits (learned, parallel to keys; nil when not read).
func limitsJSON(cfg *ratelimit.Config, keys []ratelimit.Key, reads []usageRead, learned []learnedRead, now time.Time) []limitJSON {
	out := make([]limitJSON, 0, len(keys))
	for i, k := range keys {
		r := cfg.RuleAt(k, now)
		_, inDoc := cfg.Rules[k]
		l := limitJSON{
			Key: k.String(), BizType: k.BizType, Channel: k.Channel, ChannelWide: k.IsChannelWide(), InDocument: inDoc,
			Unlimited: r.IsUnlimited(), Closed: r.IsClosed(), Shadow: r.Shadow,
			Windows: []windowNow{}, Rule: configcenter.DescribeRule(r, true),
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
		var read usageRead
		sameRule := false
		if reads != nil {
			read = reads[i]
			// The store answers for the rule in force when it read; show
			// its counts only if that is the rule described here.
			sameRule = configcenter.DescribeRule(read.rule, true) == l.Rule
		}
		var lr learnedRead
		if learned != nil {
			lr = learned[i]
		}
		for j, w := range describeWindows(r) {
			wn := windowNow{windowJSON: w}
			if read.err == nil && sameRule && j < len(read.counts) {
				n := read.counts[j]
				wn.Used = &n
			}
			if ll, ok := learnedFor(lr.limits, r.Windows[j]); ok && lr.err == nil {
				wn.learnedJSON = newLearnedJSON(ll, now)
			}
			l.Windows = append(l.Windows, wn)
		}
		if lr.err != nil {
			l.LearnedError = "could not read the learned limits from the limiter store: " + lr.err.Error()
		}
		switch {
		case reads == nil:
		case read.err != nil:
			l.UsageError = "could not read the window use from the limiter store: " + read.err.Error()
		case !sameRule:
			l.UsageError = "the rule changed while its use was read; ask again"
		}
		out = append(out, l)
	}
	return out
}

// schedulesJSON describes every schedule, with its state at now.
func schedulesJSON(cfg *ratelimit.Config, now time.Time) []scheduleJSON {
	out := make([]scheduleJSON, 0, len(cfg.Schedules))
	for _, s := range cfg.Schedules {
		out = append(out, scheduleJSON{
			Key: s.Key.String(), scheduleRef: scheduleRef{From: formatInstant(s.From), To: formatInstant(s.To)},
			State: s.StateAt(now), Unlimited: s.Rule.IsUnlimited(), Closed: s.Rule.IsClosed(),
			Rule: configcenter.DescribeRule(s.Rule, true), Windows: describeWindows(s.Rule),
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
// schedule.
func (h *handler) getLimits(c *gin.Context) {
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
		"limits":          []limitJSON{},
	}
	if cfg != nil {
		now := h.now()
		keys := limitKeys(cfg)
		reads := readUsage(c.Request.Context(), h.opts.Limits, keys)
		learned := readLearned(c.Request.Context(), h.opts.Learned, cfg, keys, now)
		body["limits"] = limitsJSON(cfg, keys, reads, learned, now)
		body["schedules"] = schedulesJSON(cfg, now)
		body["defaultWindow"] = configcenter.FormatWindow(cfg.DefaultWindow)
		body["zone"] = cfg.Zone.String()
		body["shadowAll"] = cfg.Shadow
		body["routes"] = routesJSON(h.opts.Limits.Routes())
		body["at"] = now.UTC().Format(time.RFC3339Nano)
	}
	c.Header("Cache-Control", "no-store")
	writeJSON(c, h.log, http.StatusOK, body)
}
