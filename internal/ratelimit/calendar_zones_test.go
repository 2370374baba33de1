//go:build !race

package ratelimit

import (
	"archive/zip"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// tzZones lists every zone of the tz database that Go ships.
func tzZones(t *testing.T) []string {
	t.Helper()
	r, err := zip.OpenReader(filepath.Join(runtime.GOROOT(), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		t.Fatalf("the tz database Go ships: %v", err)
	}
	defer r.Close()
	var zones []string
	for _, f := range r.File {
		if !strings.HasSuffix(f.Name, "/") {
			zones = append(zones, f.Name)
		}
	}
	if len(zones) < 300 {
		t.Fatalf("found %d zones, want the whole tz database", len(zones))
	}
	return zones
}

// TestCalendarTilesEveryZone: in every zone of the tz database, every day
// from 2020 to 2037, day periods (cutoffs 00:00 and 02:30) and month
// periods tile time (each ends where the next begins), hold the instant
// asked, and end after it, so a calendar window's retry-after is never
// negative. It runs without -race (make test runs it so): the race detector
// makes it slow.
func TestCalendarTilesEveryZone(t *testing.T) {
	from := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	to := time.Date(2038, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, name := range tzZones(t) {
		zone, err := time.LoadLocation(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, cal := range []Calendar{
			{Unit: CalendarDay, Zone: zone},
			{Unit: CalendarDay, Zone: zone, Cutoff: 150 * time.Minute},
			{Unit: CalendarMonth, Zone: zone},
		} {
			failures := 0
			start, end := cal.Period(from)
			for end.Before(to) && failures < 3 {
				// The instants asked: the period's first and last, and noon.
				for _, at := range []time.Time{start, end.Add(-time.Microsecond), start.Add(end.Sub(start) / 2)} {
					s, e := cal.Period(at)
					if !s.Equal(start) || !e.Equal(end) || at.Before(s) || !at.Before(e) {
						t.Errorf("%s %s cutoff %v: Period(%s) = [%s, %s), want [%s, %s) holding it", name, cal.Unit, cal.Cutoff,
							at.Format(time.RFC3339Nano), s.Format(time.RFC3339), e.Format(time.RFC3339), start.Format(time.RFC3339), end.Format(time.RFC3339))
						failures++
					}
				}
				ns, ne := cal.Period(end)
				if !ns.Equal(end) || !ne.After(ns) {
					t.Errorf("%s %s cutoff %v: the period after [%s, %s) is [%s, %s): periods must tile", name, cal.Unit, cal.Cutoff,
						start.Format(time.RFC3339), end.Format(time.RFC3339), ns.Format(time.RFC3339), ne.Format(time.RFC3339))
					failures++
				}
				start, end = ns, ne
			}
		}
	}
}
