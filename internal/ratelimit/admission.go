package ratelimit

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"time"
)

// The admission record of a Decision (AdmittedAt, WindowKeys,
// LimitsVersion): what a payments team answers a channel's "you sent us
// more than the limit at 10:03:17" from.

// limitsVersion is the name of cfg in decisions: its Version, or for a
// Config made in code without one a short hash of its content ("" for
// nil).
func limitsVersion(cfg *Config) string {
	if cfg == nil {
		return ""
	}
	if cfg.Version != "" {
		return cfg.Version
	}
	return contentHash(cfg)
}

// contentHash is the first 12 hex digits of the SHA-256 of a rendering of
// everything cfg decides by, in a fixed order.
func contentHash(cfg *Config) string {
	h := sha256.New()
	fmt.Fprintf(h, "window=%d zone=%v shadow=%t\n", cfg.DefaultWindow, cfg.Zone, cfg.Shadow)
	keys := make([]Key, 0, len(cfg.Rules))
	for k := range cfg.Rules {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b Key) int {
		return cmp.Or(cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.BizType, b.BizType))
	})
	writeRule := func(w io.Writer, r Rule) {
		// fmt prints maps sorted by key and a zone by its name.
		fmt.Fprintf(w, "%+v %v %t", r.Windows, r.Reserve, r.Shadow)
		for _, m := range r.Merchants {
			if m != nil {
				fmt.Fprintf(w, " %+v", *m)
			} else {
				fmt.Fprint(w, " -")
			}
		}
		fmt.Fprintln(w)
	}
	for _, k := range keys {
		fmt.Fprintf(h, "%s: ", k)
		writeRule(h, cfg.Rules[k])
	}
	for _, s := range cfg.Schedules {
		fmt.Fprintf(h, "schedule %s %d %d: ", s.Key, s.From.UnixNano(), s.To.UnixNano())
		writeRule(h, s.Rule)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// windowNames maps every window a Config can check (its rules' and
// schedules', with the reservations' tracking windows) to the store's name
// for it, so that naming an admission's windows costs a lookup, not a
// string built per window per check. It is built once per Config.
type windowNames map[windowID]string

// checks reports whether id is one of the windows named, or a merchant's
// use of one (which namesOf does not list: merchants are not known ahead).
func (n windowNames) checks(id windowID) bool {
	if _, ok := n[id]; ok {
		return true
	}
	if base, _, ok := id.key.Merchant(); ok {
		id.key = base
		_, ok = n[id]
		return ok
	}
	return false
}

// namesOf returns the names name gives the windows of cfg.
func namesOf(cfg *Config, name func(KeyWindow) string) windowNames {
	out := windowNames{}
	if cfg == nil {
		return out
	}
	eachWindow(cfg, func(kw KeyWindow) {
		id := idOf(kw)
		if _, ok := out[id]; !ok {
			out[id] = name(kw)
		}
	})
	return out
}

// eachWindow calls f for every window of cfg's rules and schedules, and for
// the windows counting each reservation's use (not the windows counting
// each merchant's use: merchants are not known ahead).
func eachWindow(cfg *Config, f func(KeyWindow)) {
	add := func(k Key, r Rule) {
		for i, w := range r.Windows {
			f(KeyWindow{Key: k, Window: w})
			if i < len(r.Reserve) {
				for n := range r.Reserve[i] {
					f(KeyWindow{Key: reserveKey(k.Channel, n), Window: w})
				}
			}
		}
	}
	for k, r := range cfg.Rules {
		add(k, r)
	}
	for _, sc := range cfg.Schedules {
		add(sc.Key, sc.Rule)
	}
}

// windowKeys returns the names of the windows of p that count its request
// (all but the ones read for other names' reservations), from names when
// it has them, else from name.
func (p plan) windowKeys(names windowNames, name func(KeyWindow) string) []string {
	n := 0
	for _, w := range p.windows {
		if w.Track != TrackOther {
			n++
		}
	}
	out := make([]string, 0, n)
	for _, w := range p.windows {
		if w.Track == TrackOther {
			continue
		}
		k, ok := names[idOf(w)]
		if !ok {
			k = name(w)
		}
		out = append(out, k)
	}
	return out
}

// storeNamer returns how store names its windows: WindowKeyer, else
// WindowKey.
func storeNamer(store Store) func(KeyWindow) string {
	if n, ok := store.(WindowKeyer); ok {
		return n.WindowKey
	}
	return WindowKey
}

// unrecorded sets d's admission record for an admission no window
// recorded (unlimited, fail-open, a shadow admission of a refusal): the
// limiter's clock at now, no window keys.
func unrecorded(d *Decision, now time.Time) {
	d.AdmittedAt, d.WindowKeys = time.UnixMicro(now.UnixMicro()), nil
}
