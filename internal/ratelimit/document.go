package ratelimit

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Bounds on what a limits document may ask for. They keep one key's sorted
// sets and the Lua script's work bounded.
const (
	MinWindow        = 10 * time.Millisecond
	MaxWindow        = 7 * 24 * time.Hour
	MaxLimit         = 10_000_000
	MaxWindowsPerKey = 8
	MaxKeys          = 10_000
	maxDocumentBytes = 1 << 20
)

// ErrEmptyDocument is returned for a document with no content. An empty
// document never clears the limits in force.
var ErrEmptyDocument = errors.New("limits document is empty")

// ParseDocument validates a limits document, YAML or JSON, and returns the
// Config it describes. The whole document is checked: any error refuses all
// of it. Two shapes are accepted:
//
//	window: 1s                 # default window for bare numbers (default 1s)
//	shadow: false              # optional: every key in shadow mode
//	limits:
//	  ONLINE_PAY:ALIPAY: 100   # 100 per 1s sliding window
//	  ONLINE_PAY:WECHAT: -1    # unlimited
//	  REFUND:ALIPAY:           # several windows, all enforced together
//	    - {limit: 20, window: 1s}
//	    - {limit: 600, window: 1m}
//	  REFUND:WECHAT: {limit: 5, window: 1s, shadow: true}
//	  REFUND:UNIONPAY: {shadow: true, windows: [{limit: 5, window: 1s}]}
//
// and a flat map of key to number (the original countLimitMap), whose
// numbers use a 1s window:
//
//	{"ONLINE_PAY:ALIPAY": 100, "ONLINE_PAY:WECHAT": -1}
//
// Unknown fields are errors, as are empty documents and documents that name
// no key at all (which would silently make every channel unlimited).
func ParseDocument(data []byte) (*Config, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, ErrEmptyDocument
	}
	if len(data) > maxDocumentBytes {
		return nil, fmt.Errorf("limits document is %d bytes; at most %d", len(data), maxDocumentBytes)
	}
	var root map[string]any
	if err := yaml.Unmarshal(data, &root); err != nil {
		var typeErr *yaml.TypeError
		if errors.As(err, &typeErr) {
			// Its text names Go types (map[string]interface {}).
			return nil, errors.New("limits document is not valid: its top level must be a map (window, shadow, limits, or BIZTYPE:CHANNEL keys)")
		}
		return nil, fmt.Errorf("limits document is not valid YAML or JSON: %w", err)
	}
	if len(root) == 0 {
		return nil, ErrEmptyDocument
	}
	cfg := &Config{DefaultWindow: time.Second, Rules: map[Key]Rule{}}
	limits, err := splitRoot(root, cfg)
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
		key, err := ParseKey(name)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		rule, err := parseRule(limits[name], cfg.DefaultWindow)
		if err != nil {
			problems = append(problems, fmt.Sprintf("key %q: %v", name, err))
			continue
		}
		cfg.Rules[key] = rule
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return cfg, nil
}

// splitRoot reads the top-level fields into cfg and returns the key map.
func splitRoot(root map[string]any, cfg *Config) (map[string]any, error) {
	_, hasLimits := root["limits"]
	if !hasLimits {
		for name := range root {
			if name == "window" || name == "shadow" || name == "routes" {
				return nil, errors.New(`limits document has "` + name + `" but no "limits" map`)
			}
		}
		return root, nil // the flat countLimitMap shape
	}
	for name, v := range root {
		switch name {
		case "limits":
		case "window":
			d, err := parseWindowSize(v)
			if err != nil {
				return nil, fmt.Errorf("window: %w", err)
			}
			cfg.DefaultWindow = d
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
			cfg.Routes = routes
		default:
			return nil, fmt.Errorf("unknown top-level field %q (want window, shadow, limits, routes)", name)
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

// parseRule reads one key's value: a number, a list of windows, or an object.
func parseRule(v any, defaultWindow time.Duration) (Rule, error) {
	switch val := v.(type) {
	case []any:
		return buildRule(val, false, defaultWindow)
	case map[string]any:
		return parseRuleObject(val, defaultWindow)
	default:
		n, err := parseLimit(v)
		if err != nil {
			return Rule{}, err
		}
		return newRule([]Window{{Limit: n, Size: defaultWindow}}, false)
	}
}

func parseRuleObject(obj map[string]any, defaultWindow time.Duration) (Rule, error) {
	shadow := false
	if s, ok := obj["shadow"]; ok {
		b, ok := s.(bool)
		if !ok {
			return Rule{}, errors.New("shadow: want true or false")
		}
		shadow = b
	}
	if ws, ok := obj["windows"]; ok {
		for name := range obj {
			if name != "windows" && name != "shadow" {
				return Rule{}, fmt.Errorf("unknown field %q beside windows (want windows, shadow)", name)
			}
		}
		list, ok := ws.([]any)
		if !ok {
			return Rule{}, errors.New("windows: want a list of {limit, window}")
		}
		return buildRule(list, shadow, defaultWindow)
	}
	w, err := parseWindow(obj, defaultWindow, true)
	if err != nil {
		return Rule{}, err
	}
	return newRule([]Window{w}, shadow)
}

func buildRule(list []any, shadow bool, defaultWindow time.Duration) (Rule, error) {
	if len(list) == 0 {
		return Rule{}, errors.New("empty window list; write -1 for unlimited")
	}
	if len(list) > MaxWindowsPerKey {
		return Rule{}, fmt.Errorf("%d windows; at most %d", len(list), MaxWindowsPerKey)
	}
	ws := make([]Window, 0, len(list))
	for i, item := range list {
		obj, ok := item.(map[string]any)
		if !ok {
			return Rule{}, fmt.Errorf("window %d: want {limit, window}", i+1)
		}
		w, err := parseWindow(obj, defaultWindow, false)
		if err != nil {
			return Rule{}, fmt.Errorf("window %d: %w", i+1, err)
		}
		ws = append(ws, w)
	}
	return newRule(ws, shadow)
}

// parseWindow reads {limit, window}. allowShadow permits a shadow field,
// which the single-window object form carries beside limit and window.
func parseWindow(obj map[string]any, defaultWindow time.Duration, allowShadow bool) (Window, error) {
	for name := range obj {
		if name == "limit" || name == "window" || (allowShadow && name == "shadow") {
			continue
		}
		return Window{}, fmt.Errorf("unknown field %q (want limit, window)", name)
	}
	lv, ok := obj["limit"]
	if !ok {
		return Window{}, errors.New("limit is missing")
	}
	n, err := parseLimit(lv)
	if err != nil {
		return Window{}, err
	}
	size := defaultWindow
	if wv, ok := obj["window"]; ok {
		if size, err = parseWindowSize(wv); err != nil {
			return Window{}, fmt.Errorf("window: %w", err)
		}
	}
	return Window{Limit: n, Size: size}, nil
}

// newRule drops unlimited windows, sorts the rest and rejects repeats.
func newRule(ws []Window, shadow bool) (Rule, error) {
	kept := ws[:0:0]
	for _, w := range ws {
		if w.Limit != Unlimited {
			kept = append(kept, w)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].Size < kept[j].Size })
	for i := 1; i < len(kept); i++ {
		if kept[i].Size == kept[i-1].Size {
			return Rule{}, fmt.Errorf("two windows of %s", kept[i].Size)
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	return Rule{Windows: kept, Shadow: shadow}, nil
}

func parseLimit(v any) (int64, error) {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("limit %d is too large; at most %d", x, MaxLimit)
		}
		n = int64(x)
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) || math.IsNaN(x) {
			return 0, fmt.Errorf("limit %v: want a whole number", x)
		}
		if math.Abs(x) > MaxLimit {
			return 0, fmt.Errorf("limit %v is too large; at most %d", x, MaxLimit)
		}
		n = int64(x)
	case string:
		return 0, fmt.Errorf("limit %q: want a number, not a string", x)
	default:
		return 0, fmt.Errorf("limit: want a number, -1 for unlimited")
	}
	if n < Unlimited {
		return 0, fmt.Errorf("limit %d: want 0..%d, or -1 for unlimited", n, MaxLimit)
	}
	if n > MaxLimit {
		return 0, fmt.Errorf("limit %d is too large; at most %d", n, MaxLimit)
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
