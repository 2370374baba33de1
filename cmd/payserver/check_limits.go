package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"payserver/internal/configcenter"
	"payserver/internal/iso4217"
	"payserver/internal/limits"
	"payserver/internal/ratelimit"
)

// checkLimits validates a limits document offline and prints what payserver
// would enforce. Ops run it before publishing to Nacos. Routes are checked
// against the channels the server would have: --channels, else those of
// its configuration (PAYSERVER_CONFIG and PAYSERVER_CHANNELS in environ).
// With --at it shows what is in force at that instant (schedules applied,
// each calendar window's period); --json prints that as JSON, at now
// without --at. Exit 0 when valid, 1 when refused, 2 on usage errors.
func checkLimits(args []string, environ []string, stdout, stderr io.Writer) int {
	const usage = "usage: payserver check-limits FILE [--channels A,B,C] [--at RFC3339] [--json]   (FILE - reads standard input)"
	var file, at, channels string
	asJSON, channelsGiven := false, false
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--json" || a == "-json":
			asJSON = true
		case (a == "--at" || a == "-at") && i+1 < len(args):
			i++
			at = args[i]
		case strings.HasPrefix(a, "--at="):
			at = strings.TrimPrefix(a, "--at=")
		case (a == "--channels" || a == "-channels") && i+1 < len(args):
			i++
			channels, channelsGiven = args[i], true
		case strings.HasPrefix(a, "--channels="):
			channels, channelsGiven = strings.TrimPrefix(a, "--channels="), true
		case a == "-h" || a == "--help":
			fmt.Fprintln(stdout, usage)
			return 0
		case file == "" && (a == "-" || !strings.HasPrefix(a, "-")):
			file = a
		default:
			fmt.Fprintln(stderr, usage)
			return 2
		}
	}
	if file == "" {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	var have map[string]bool
	if channelsGiven {
		have = map[string]bool{}
		for _, code := range splitList(channels) {
			have[code] = true
		}
	} else {
		cfg, err := LoadConfig(environ)
		if err != nil {
			fmt.Fprintf(stderr, "check-limits: reading the server's configuration for its channels: %v\n(or name them: --channels A,B,C)\n", err)
			return 2
		}
		have = make(map[string]bool, len(cfg.Channels))
		for code := range cfg.Channels {
			have[code] = true
		}
	}
	when := time.Now()
	if at != "" {
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			fmt.Fprintf(stderr, "check-limits: --at %q: must be an RFC 3339 time, such as 2026-03-08T02:30:00-05:00\n", at)
			return 2
		}
		when = t
	}
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		fmt.Fprintf(stderr, "check-limits: %v\n", err)
		return 2
	}
	doc, err := limits.Parse(data)
	if err == nil {
		err = doc.CheckRouteChannels(func(code string) bool { return have[code] })
	}
	if err != nil {
		fmt.Fprintf(stderr, "INVALID: %v\npayserver would refuse this document and keep the limits in force.\n", err)
		return 1
	}
	cfg := doc.Config
	switch {
	case asJSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		f := inForce(cfg, when)
		f.Routes = doc.Routes
		if f.Routes == nil {
			f.Routes = limits.Routes{}
		}
		if err := enc.Encode(f); err != nil {
			fmt.Fprintf(stderr, "check-limits: %v\n", err)
			return 2
		}
	case at != "":
		printInForce(stdout, inForce(cfg, when))
	default:
		printLimits(stdout, doc, time.Now())
	}
	return 0
}

// inForceJSON is what check-limits --at shows: the rules in force at At of
// every key of the document, and (with --json) its routes.
type inForceJSON struct {
	At     string           `json:"at"`
	Keys   []keyInForceJSON `json:"keys"`
	Routes limits.Routes    `json:"routes,omitempty"`
}

// keyInForceJSON is one key's rule at that instant; Schedule names the
// schedule that replaced its base rule, if one did. An unlimited key has
// Unlimited set and no windows.
type keyInForceJSON struct {
	Key       string              `json:"key"`
	Schedule  string              `json:"schedule,omitempty"`
	Unlimited bool                `json:"unlimited"`
	Windows   []windowInForceJSON `json:"windows"`
}

// windowInForceJSON is one window: a sliding one by its size, a calendar
// one by its calendar, zone and cutoff with the period holding the instant.
type windowInForceJSON struct {
	Limit       *int64           `json:"limit,omitempty"`
	Amount      *int64           `json:"amount,omitempty"`
	AmountMajor string           `json:"amountMajor,omitempty"` // Amount in major units of Currency
	Currency    string           `json:"currency,omitempty"`
	Window      string           `json:"window,omitempty"`
	Calendar    string           `json:"calendar,omitempty"`
	Zone        string           `json:"zone,omitempty"`
	Cutoff      string           `json:"cutoff,omitempty"`
	PeriodStart string           `json:"periodStart,omitempty"`
	PeriodEnd   string           `json:"periodEnd,omitempty"`
	Reserve     map[string]int64 `json:"reserve,omitempty"`
	// PerMerchant and Merchants are the window's limits per merchant
	// (PerMerchant absent when only overrides are set; -1 no limit).
	PerMerchant *int64           `json:"perMerchant,omitempty"`
	Merchants   map[string]int64 `json:"merchants,omitempty"`
}

// inForce computes the rules of every key of cfg at t: the base rules, or
// the schedule active then, and each calendar window's period.
func inForce(cfg *ratelimit.Config, t time.Time) inForceJSON {
	seen := map[ratelimit.Key]bool{}
	for k := range cfg.Rules {
		seen[k] = true
	}
	for _, sc := range cfg.Schedules {
		seen[sc.Key] = true
	}
	keys := make([]ratelimit.Key, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	out := inForceJSON{At: t.Format(time.RFC3339), Keys: []keyInForceJSON{}}
	for _, k := range keys {
		kj := keyInForceJSON{Key: k.String(), Windows: []windowInForceJSON{}}
		rule := cfg.RuleAt(k, t)
		for _, sc := range cfg.Schedules {
			if sc.Key == k && sc.Active(t) {
				kj.Schedule = sc.From.Format(time.RFC3339) + ".." + sc.To.Format(time.RFC3339)
			}
		}
		kj.Unlimited = rule.IsUnlimited()
		for i, w := range rule.Windows {
			wj := windowInForceJSON{Currency: w.Currency}
			limit := w.Limit
			if w.Amount {
				wj.Amount = &limit
				wj.AmountMajor, _ = iso4217.Major(limit, w.Currency)
			} else {
				wj.Limit = &limit
			}
			if i < len(rule.Reserve) && len(rule.Reserve[i]) > 0 {
				wj.Reserve = rule.Reserve[i]
			}
			if m := rule.MerchantsOf(i); m != nil {
				if m.PerMerchant != ratelimit.Unlimited {
					wj.PerMerchant = &m.PerMerchant
				}
				wj.Merchants = m.Overrides
			}
			if w.IsCalendar() {
				start, end := w.Calendar.Period(t)
				wj.Calendar, wj.Zone, wj.Cutoff = string(w.Calendar.Unit), w.Calendar.Zone.String(), ratelimit.FormatCutoff(w.Calendar.Cutoff)
				wj.PeriodStart, wj.PeriodEnd = start.In(w.Calendar.Zone).Format(time.RFC3339), end.In(w.Calendar.Zone).Format(time.RFC3339)
			} else {
				wj.Window = ratelimit.FormatSize(w.Size)
			}
			kj.Windows = append(kj.Windows, wj)
		}
		out.Keys = append(out.Keys, kj)
	}
	return out
}

// printInForce writes inForce as text: one line per key, then one per
// calendar window with its period.
func printInForce(stdout io.Writer, f inForceJSON) {
	fmt.Fprintf(stdout, "In force at %s (%d keys of the document; keys not listed are unlimited):\n", f.At, len(f.Keys))
	for _, k := range f.Keys {
		from := ""
		if k.Schedule != "" {
			from = "  (schedule " + k.Schedule + ")"
		}
		if len(k.Windows) == 0 {
			fmt.Fprintf(stdout, "  %-40s unlimited%s\n", k.Key, from)
			continue
		}
		fmt.Fprintf(stdout, "  %s%s\n", k.Key, from)
		for _, w := range k.Windows {
			line := fmt.Sprintf("    limit %d", derefOr0(w.Limit))
			if w.Amount != nil {
				line = "    amount " + iso4217.Text(*w.Amount, w.Currency)
			}
			if w.Calendar != "" {
				line += fmt.Sprintf(" per %s from %s %s: period %s .. %s", w.Calendar, w.Cutoff, w.Zone, w.PeriodStart, w.PeriodEnd)
			} else {
				line += " per " + w.Window
			}
			if len(w.Reserve) > 0 {
				line += fmt.Sprintf(", reserve %v", w.Reserve)
			}
			if w.PerMerchant != nil {
				line += fmt.Sprintf(", perMerchant %d", *w.PerMerchant)
			}
			if len(w.Merchants) > 0 {
				line += fmt.Sprintf(", merchants %v", w.Merchants)
			}
			fmt.Fprintln(stdout, line)
		}
	}
}

func derefOr0(n *int64) int64 {
	if n == nil {
		return 0
	}
	return *n
}

// printLimits writes what payserver would enforce: each key's base rule,
// then each schedule with whether it is past, active or upcoming at now,
// then the routes.
func printLimits(stdout io.Writer, doc *limits.Document, now time.Time) {
	cfg := doc.Config
	keys := make([]ratelimit.Key, 0, len(cfg.Rules))
	for k := range cfg.Rules {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	fmt.Fprintf(stdout, "OK: %d keys, default window %s, zone %s, global shadow %v\n", len(keys), configcenter.FormatWindow(cfg.DefaultWindow), cfg.Zone, cfg.Shadow)
	for _, k := range keys {
		r := cfg.Rules[k]
		if cfg.Shadow {
			r.Shadow = true
		}
		fmt.Fprintf(stdout, "  %-40s %s\n", k.String(), configcenter.DescribeRule(r, true))
	}
	if len(cfg.Schedules) > 0 {
		fmt.Fprintf(stdout, "Schedules (%d), each replacing its key's rule from FROM to TO (exclusive):\n", len(cfg.Schedules))
		for _, s := range cfg.Schedules {
			state := s.StateAt(now)
			switch state {
			case ratelimit.ScheduleActive:
				state = "ACTIVE now"
			case ratelimit.SchedulePast:
				state = "past, ignored"
			}
			fmt.Fprintf(stdout, "  %-40s %s .. %s  %s  (%s)\n", s.Key.String(), s.From.Format(time.RFC3339), s.To.Format(time.RFC3339),
				configcenter.DescribeRule(s.Rule, true), state)
		}
	}
	fmt.Fprintln(stdout, "Keys not listed are unlimited.")
	fmt.Fprintln(stdout, "RESOLVE:<CHANNEL> keys (reserved bizType RESOLVE) limit the resolver's queries and closes of unknown outcomes on that channel; they count only there, never in *:CHANNEL windows or reservations, and are unlimited unless set.")
	if hasMerchants(cfg) {
		fmt.Fprintln(stdout, "[perMerchant:N,ID:M] after a window limits each merchant's own use of it to N, and merchant ID's to M (-1 no limit, 0 refused): a request is admitted only if the window and its merchant's use both have room. A request naming no merchant counts as the merchant \"-\".")
	}
	if hasReserve(cfg) {
		fmt.Fprintln(stdout, "{NAME:N} after a window keeps N of its limit for bizType NAME: a request of any other bizType is admitted only while the window's use, plus every other name's unmet reservation (its N less its own use in the window), stays within the limit.")
	}
	bizTypes := make([]string, 0, len(doc.Routes))
	for biz := range doc.Routes {
		bizTypes = append(bizTypes, biz)
	}
	sort.Strings(bizTypes)
	for _, biz := range bizTypes {
		fmt.Fprintf(stdout, "  route %-34s %s\n", biz, configcenter.DescribeRoute(doc.Routes[biz]))
	}

}

// hasMerchants reports whether a rule or schedule of cfg has limits per
// merchant.
func hasMerchants(cfg *ratelimit.Config) bool {
	for _, r := range cfg.Rules {
		if r.Merchants != nil {
			return true
		}
	}
	for _, sc := range cfg.Schedules {
		if sc.Rule.Merchants != nil {
			return true
		}
	}
	return false
}

// hasReserve reports whether a rule or schedule of cfg has reservations.
func hasReserve(cfg *ratelimit.Config) bool {
	for _, r := range cfg.Rules {
		if len(r.Reserve) > 0 {
			return true
		}
	}
	for _, sc := range cfg.Schedules {
		if len(sc.Rule.Reserve) > 0 {
			return true
		}
	}
	return false
}
