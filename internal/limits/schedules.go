package limits

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"payserver/internal/ratelimit"
)

// parseSchedules reads the schedules list:
//
//	schedules:
//	  - {key: "*:UNIONPAY", from: "2026-12-01T02:00:00+08:00", to: "2026-12-01T04:00:00+08:00", limits: 0}
//	  - {key: "ONLINE_PAY:ALIPAY", from: ..., to: ..., limits: [{limit: 300, window: 1s}]}
//
// key is a key as in limits (a channel-wide one too); from and to are RFC
// 3339 times with an offset, from before to; limits is what limits would
// hold for the key: 0 closes it (one count window of the default window,
// limit 0), -1 makes it unlimited, a number, a list or an object as for a
// key. Two schedules of one key must not overlap. Past schedules are kept
// (Config.RuleAt ignores them). The result is sorted by key, then from. Each
// problem names the schedule by its position (from 1) and key.
func parseSchedules(v any, cfg *ratelimit.Config) ([]ratelimit.Schedule, []string) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, []string{"schedules: want a list of {key, from, to, limits}"}
	}
	if len(list) > MaxSchedules {
		return nil, []string{fmt.Sprintf("schedules: %d schedules; at most %d (remove past ones)", len(list), MaxSchedules)}
	}
	var out []ratelimit.Schedule
	var problems []string
	for i, item := range list {
		s, name, err := parseSchedule(item, cfg)
		if err != nil {
			if name != "" {
				problems = append(problems, fmt.Sprintf("schedule %d (key %q): %v", i+1, name, err))
			} else {
				problems = append(problems, fmt.Sprintf("schedule %d: %v", i+1, err))
			}
			continue
		}
		out = append(out, s)
	}
	if len(problems) > 0 {
		return nil, problems
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Key != b.Key {
			return a.Key.String() < b.Key.String()
		}
		return a.From.Before(b.From)
	})
	for i := 1; i < len(out); i++ {
		a, b := out[i-1], out[i]
		if a.Key == b.Key && b.From.Before(a.To) {
			problems = append(problems, fmt.Sprintf("schedules of key %q overlap: %s..%s and %s..%s (one key has one schedule at a time)",
				b.Key, a.From.Format(time.RFC3339), a.To.Format(time.RFC3339), b.From.Format(time.RFC3339), b.To.Format(time.RFC3339)))
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return out, nil
}

// scheduleFields are the fields of a schedule, as error messages list them.
const scheduleFields = "key, from, to, limits"

// parseSchedule reads one schedule; name is its key as written, once read.
func parseSchedule(item any, cfg *ratelimit.Config) (s ratelimit.Schedule, name string, err error) {
	obj, ok := item.(map[string]any)
	if !ok {
		return ratelimit.Schedule{}, "", fmt.Errorf("want {%s}", scheduleFields)
	}
	if kv, ok := obj["key"].(string); ok {
		name = kv
	}
	for f := range obj {
		switch f {
		case "key", "from", "to", "limits":
		default:
			return ratelimit.Schedule{}, name, fmt.Errorf("unknown field %q (want %s)", f, scheduleFields)
		}
	}
	if _, ok := obj["key"]; !ok {
		return ratelimit.Schedule{}, "", errors.New("key is missing")
	}
	if name == "" {
		return ratelimit.Schedule{}, "", fmt.Errorf("key %v: want \"BIZTYPE:CHANNEL\"", obj["key"])
	}
	if s.Key, err = ratelimit.ParseKey(name); err != nil {
		return ratelimit.Schedule{}, name, err
	}
	if s.From, err = parseInstant(obj, "from"); err != nil {
		return ratelimit.Schedule{}, name, err
	}
	if s.To, err = parseInstant(obj, "to"); err != nil {
		return ratelimit.Schedule{}, name, err
	}
	if !s.From.Before(s.To) {
		return ratelimit.Schedule{}, name, fmt.Errorf("from %s is not before to %s", s.From.Format(time.RFC3339), s.To.Format(time.RFC3339))
	}
	lv, ok := obj["limits"]
	if !ok {
		return ratelimit.Schedule{}, name, errors.New("limits is missing (0 closes the key for the schedule)")
	}
	if s.Rule, err = parseRule(lv, ruleContext{cfg: cfg, key: s.Key}); err != nil {
		return ratelimit.Schedule{}, name, fmt.Errorf("limits: %w", err)
	}
	return s, name, nil
}

// parseInstant reads field of obj: an RFC 3339 time with an offset.
func parseInstant(obj map[string]any, field string) (time.Time, error) {
	v, ok := obj[field]
	if !ok {
		return time.Time{}, fmt.Errorf("%s is missing", field)
	}
	switch t := v.(type) {
	case time.Time:
		return t, nil
	case string:
		at, err := time.Parse(time.RFC3339, t)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s %q: want an RFC 3339 time with an offset, such as \"2026-12-01T02:00:00+08:00\"", field, t)
		}
		return at, nil
	}
	return time.Time{}, fmt.Errorf("%s %v: want an RFC 3339 time in quotes, such as \"2026-12-01T02:00:00+08:00\"", field, v)
}
