package limits

import (
	"fmt"
	"math"
	"sort"

	"payserver/internal/ratelimit"
)

// parseAdaptive reads the top-level adaptive section: how each named key's
// sliding count windows learn from the channel's throttling (every key
// learns with the defaults unless named here):
//
//	adaptive:
//	  "ONLINE_PAY:ALIPAY": off                               # never learns
//	  "REFUND:ALIPAY": {decrease: 0.5, increase: 0.1, floor: 2}
//
// decrease is the fraction of what a window admitted that its limit drops
// to on a throttle, in (0, 1) (default 0.7); increase the fraction of the
// configured limit it climbs per window without one, in (0, 1] (default
// 0.05); floor the least it drops to, a whole number of at least 1 (default
// 1% of the limit, or 1). A key named here must be in limits; the setting
// holds for its schedules too. It returns one problem per bad entry.
func parseAdaptive(v any, cfg *ratelimit.Config) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return []string{"adaptive: want a map of BIZTYPE:CHANNEL to off or {decrease, increase, floor}"}
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	var problems []string
	for _, name := range names {
		key, err := ratelimit.ParseKey(name)
		if err != nil {
			problems = append(problems, "adaptive: "+err.Error())
			continue
		}
		rule, ok := cfg.Rules[key]
		if !ok {
			problems = append(problems, fmt.Sprintf("adaptive: key %q is not in limits", name))
			continue
		}
		a, err := parseAdaptiveSetting(m[name])
		if err != nil {
			problems = append(problems, fmt.Sprintf("adaptive: key %q: %v", name, err))
			continue
		}
		rule.Adaptive = a
		cfg.Rules[key] = rule
		for i := range cfg.Schedules {
			if cfg.Schedules[i].Key == key {
				cfg.Schedules[i].Rule.Adaptive = a
			}
		}
	}
	return problems
}

// parseAdaptiveSetting reads one key's setting: off (or false), or an
// object of decrease, increase and floor, each optional.
func parseAdaptiveSetting(v any) (ratelimit.Adaptive, error) {
	switch x := v.(type) {
	case string:
		if x == "off" {
			return ratelimit.Adaptive{Off: true}, nil
		}
	case bool:
		if !x {
			return ratelimit.Adaptive{Off: true}, nil
		}
	case map[string]any:
		var a ratelimit.Adaptive
		for field, fv := range x {
			var err error
			switch field {
			case "decrease":
				a.Decrease, err = fraction("decrease", fv, false)
			case "increase":
				a.Increase, err = fraction("increase", fv, true)
			case "floor":
				a.Floor, err = parseWhole("floor", fv, MaxLimit)
				if err == nil && a.Floor < 1 {
					err = fmt.Errorf("floor %d: want at least 1", a.Floor)
				}
			default:
				err = fmt.Errorf("unknown field %q (want decrease, increase, floor)", field)
			}
			if err != nil {
				return ratelimit.Adaptive{}, err
			}
		}
		return a, a.Validate()
	}
	return ratelimit.Adaptive{}, fmt.Errorf("want off or {decrease, increase, floor}, got %v", v)
}

// fraction reads field, a fraction in (0, 1), or (0, 1] when one is
// allowed, as millionths.
func fraction(field string, v any, one bool) (int64, error) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int:
		f = float64(x)
	default:
		return 0, fmt.Errorf("%s: want a number, got %v", field, v)
	}
	if math.IsNaN(f) || f <= 0 || f > 1 || (f == 1 && !one) {
		if one {
			return 0, fmt.Errorf("%s %v: want a fraction in (0, 1]", field, f)
		}
		return 0, fmt.Errorf("%s %v: want a fraction in (0, 1)", field, f)
	}
	m, err := ratelimit.Millionths(f)
	if err == nil && m == 0 {
		return 0, fmt.Errorf("%s %v: too small (below a millionth)", field, f)
	}
	return m, err
}
