package console_test

import (
	"strings"
	"testing"
	"time"

	"payserver/internal/console/consoletest"
	"payserver/internal/stats"
)

// TestReportTimesOneRule: every report endpoint takes from and to alike:
// RFC 3339, "now" or a negative duration before now, to defaulting to now
// and from to an hour before to; a space where an offset's "+" was (an
// unencoded "+" in a URL) is told to encode it.
func TestReportTimesOneRule(t *testing.T) {
	s := newTestServer(t, "")
	routes := newRouteServer(t, fakeRouteRows{})
	s.Reports.AmountRows = []stats.AmountBucket{}
	hourAgo, nine := consoletest.Now.Add(-time.Hour), time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name, query string
		status      int
		// from and to are what the report covered, for a 200.
		from, to time.Time
		want     string // a fragment of a 400's body
	}{
		{"defaults: the hour before now", "", 200, hourAgo, consoletest.Now, ""},
		{"only to: the hour before it", "to=2026-03-01T09:00:00Z", 200, nine.Add(-time.Hour), nine, ""},
		{"now and a negative duration", "from=-2h&to=now", 200, consoletest.Now.Add(-2 * time.Hour), consoletest.Now, ""},
		{"minutes", "from=-90m&to=-30m", 200, consoletest.Now.Add(-90 * time.Minute), consoletest.Now.Add(-30 * time.Minute), ""},
		{"an encoded offset", "from=2026-03-01T17:00:00%2B08:00&to=2026-03-01T18:00:00%2B08:00", 200, consoletest.Now.Add(-90*time.Minute - 20*time.Second), consoletest.Now.Add(-30*time.Minute - 20*time.Second), ""},
		{"an unencoded + arrives as a space", "from=2026-03-01T17:00:00+08:00", 400, time.Time{}, time.Time{}, "%2B"},
		{"a positive duration", "from=1h", 400, time.Time{}, time.Time{}, "negative"},
		{"not a time", "from=yesterday", 400, time.Time{}, time.Time{}, "RFC 3339"},
	}
	for _, tt := range tests {
		for _, ep := range []struct {
			path string
			get  func(t *testing.T, path, token string) consoletest.Answer
			// step is the report's bucket: from is rounded down and to up
			// to it (routes: a minute, as stored).
			step time.Duration
		}{
			{"/reports/channel-limits", s.Get, time.Minute},
			{"/reports/channel-amounts", s.Get, time.Minute},
			{"/reports/routes", routes.Get, 0},
		} {
			t.Run(tt.name+" "+ep.path, func(t *testing.T) {
				a := ep.get(t, ep.path+"?"+tt.query, "")
				if a.Status != tt.status {
					t.Fatalf("got %d %s, want %d", a.Status, a.Body, tt.status)
				}
				if tt.status != 200 {
					if !strings.Contains(a.Body, tt.want) || !strings.Contains(a.Body, `"field":"from"`) {
						t.Errorf("body %s, want it to name from and say %q", a.Body, tt.want)
					}
					return
				}
				from, to := tt.from, tt.to
				if ep.step > 0 {
					from = from.Truncate(ep.step)
					if to = to.Truncate(ep.step); to.Before(tt.to) {
						to = to.Add(ep.step)
					}
				}
				if want := `"from":"` + from.Format(time.RFC3339) + `","to":"` + to.Format(time.RFC3339) + `"`; !strings.Contains(a.Body, want) {
					t.Errorf("body %s, want it to cover %s", a.Body, want)
				}
			})
		}
	}
}
