package console

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"payserver/internal/httpapi"
	"payserver/internal/iso4217"
	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// quotaLine is one calendar window on the dashboard, with its forecast.
type quotaLine struct {
	Key, Rule, Window string
	// Used and Limit are for people: a count as it is, an amount in
	// major units with its currency after Limit ("12,745.70" of
	// "5,000,000.00 CNY").
	Used, Limit    string
	Percent, Color string
	// Outlook says, in words, when the window runs out at the current
	// rate, or that it lasts until its period ends.
	Outlook string
	// Runs is true when the window runs out before its period ends.
	Runs bool
	// Stale, when not empty, says how old Used is ("5m0s"): its last read
	// is past quotaStaleAfter (the limiter's store did not answer since).
	Stale string
	// InProcess, when not empty, is the use by admissions this instance
	// decided in process while Redis failed, in this period, which Used
	// leaves out ("3", or "1,200.00 CNY").
	InProcess string
	// RedisRestarted, when not empty, is when Redis was seen to restart in
	// this period ("14:05 Asia/Shanghai"): Used may miss admissions made
	// before then.
	RedisRestarted string
	// key and window identify the line's window for markQuotas.
	key    ratelimit.Key
	window ratelimit.Window
}

// markQuotas adds to each line what out knows: the use decided in
// process, and a Redis restart within the window's period (restartedAt,
// zero if none).
func markQuotas(lines []quotaLine, out httpapi.OutageView, restartedAt, now time.Time) {
	for i := range lines {
		l := &lines[i]
		w := l.window
		if use := out.DecidedInProcess(l.key, ratelimit.Rule{Windows: []ratelimit.Window{w}}); len(use) == 1 && use[0] > 0 {
			l.InProcess = strconv.FormatInt(use[0], 10)
			if w.Amount {
				l.InProcess = iso4217.Text(use[0], w.Currency)
			}
		}
		if start, _ := w.Calendar.Period(now); !restartedAt.IsZero() && !restartedAt.Before(start) {
			l.RedisRestarted = clock(restartedAt.In(w.Calendar.Zone), now)
		}
	}
}

// quotaStaleAfter is the age past which a quota's use is marked as not
// current: three of the forecaster's reads (stats.DefaultForecastInterval)
// missed.
const quotaStaleAfter = 3 * stats.DefaultForecastInterval

// quotaLines returns the dashboard's lines of the forecasts whose key is in
// the page (inPage) and matches the filter, each marked Stale when its use
// was read too long before now.
func quotaLines(fs []stats.Forecast, inPage map[string]bool, now time.Time) []quotaLine {
	var out []quotaLine
	for _, f := range fs {
		if !inPage[f.Key.String()] {
			continue
		}
		l := newQuotaLine(f)
		if age := now.Sub(f.At); !f.At.IsZero() && age > quotaStaleAfter {
			l.Stale = age.Round(time.Second).String()
		}
		out = append(out, l)
	}
	return out
}

// calendarNames are how the outlook names a calendar unit's cap.
var calendarNames = map[string]string{"day": "daily", "month": "monthly"}

func newQuotaLine(f stats.Forecast) quotaLine {
	util := f.Utilization()
	l := quotaLine{
		Key: f.Key.String(), Rule: f.Window.Name(), Window: f.Window.ID(),
		Used: strconv.FormatInt(f.Used, 10), Limit: strconv.FormatInt(f.Limit, 10),
		Percent: strconv.FormatFloat(100*util, 'f', 0, 64) + "%", Color: "#2e9d5b",
		key: f.Key, window: f.Window,
	}
	switch {
	case util >= 0.9:
		l.Color = "#d64545"
	case util >= 0.7:
		l.Color = "#e0a030"
	}
	if f.Window.Amount {
		l.Limit = iso4217.Text(f.Limit, f.Window.Currency)
		l.Used = strings.TrimSuffix(iso4217.Text(f.Used, f.Window.Currency), strings.TrimLeft(l.Limit, "-0123456789.,"))
	}
	zone := f.Window.Calendar.Zone
	what := "count"
	if f.Window.Amount {
		what = "amount"
		if f.Window.Currency != "" {
			what = f.Window.Currency + " amount"
		}
	}
	name := fmt.Sprintf("%s's %s %s", f.Key.Channel, calendarNames[string(f.Window.Calendar.Unit)], what)
	if f.Key.IsChannelWide() {
		name = "the channel-wide " + name
	} else {
		name += " for " + f.Key.BizType
	}
	switch {
	case f.Used >= f.Limit:
		l.Outlook, l.Runs = fmt.Sprintf("%s has run out; it resets at %s", name, clock(f.PeriodEnd.In(zone), f.At)), true
	case !f.ExhaustsAt.IsZero():
		l.Outlook, l.Runs = fmt.Sprintf("at this rate %s runs out at %s", name, clock(f.ExhaustsAt.In(zone), f.At)), true
	default:
		l.Outlook = fmt.Sprintf("at this rate %s lasts until the period ends at %s", name, clock(f.PeriodEnd.In(zone), f.At))
	}
	return l
}

// clock renders t as "21:40 Asia/Shanghai", with its date when it is not
// on the same local day as now.
func clock(t, now time.Time) string {
	zone := t.Location().String()
	if y, m, d := t.Date(); y == now.In(t.Location()).Year() && m == now.In(t.Location()).Month() && d == now.In(t.Location()).Day() {
		return t.Format("15:04") + " " + zone
	}
	return t.Format("Jan 2 15:04") + " " + zone
}
