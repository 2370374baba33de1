package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"payserver/integration/chaos/witness"
)

// calendarZones are zones whose daylight saving, or date-line jump, moves
// a calendar period's start: Santiago, Havana, Asunción and Beirut start
// summer time at midnight, Lord Howe by half an hour, Apia skipped a whole
// day in 2011; New York, London and Shanghai for the ordinary cases.
var calendarZones = []string{"America/Santiago", "America/Havana", "America/Asuncion", "Asia/Beirut",
	"Australia/Lord_Howe", "Pacific/Apia", "America/New_York", "Europe/London", "Asia/Shanghai"}

// TestChaosCalendar checks payserver's calendar periods against the
// witness's own, at instants drawn from the seed near the daylight-saving
// transitions of calendarZones (2010–2030): for each instant `payserver
// check-limits --at` names the period of every calendar window of a drawn
// document, and the witness must agree that the period holds the instant,
// that it starts exactly at periodStart (the instant before is another
// period) and ends exactly at periodEnd. The campaign's Redis-time clock
// cannot be moved, so this is where a calendar bug (a DST gap left to
// time.Date) shows.
func TestChaosCalendar(t *testing.T) {
	run := chaosSettings(t)
	r := rand.New(rand.NewPCG(run.seed, 3))
	type win struct {
		calendar, zone string
		cutoffMin      int
	}
	var wins []win
	var doc strings.Builder
	doc.WriteString("limits:\n")
	for i := range 24 {
		w := win{calendar: []string{"day", "month"}[r.IntN(2)], zone: calendarZones[r.IntN(len(calendarZones))]}
		// Cut-offs at midnight and at the hours transitions happen at are
		// the interesting ones; the rest of the day now and then.
		w.cutoffMin = []int{0, 0, 60, 120, 180, 30, r.IntN(24 * 60)}[r.IntN(7)]
		wins = append(wins, w)
		fmt.Fprintf(&doc, "  CAL%d:ALIPAY:\n    - {limit: 5, calendar: %s, zone: %s, cutoff: \"%02d:%02d\"}\n", i, w.calendar, w.zone, w.cutoffMin/60, w.cutoffMin%60)
	}
	path := filepath.Join(t.TempDir(), "calendar.yaml")
	mustWrite(t, path, doc.String())
	checked := 0
	for range 60 {
		at := nearTransition(r)
		out, err := exec.Command(fastBinary, "check-limits", path, "--at", at.Format(time.RFC3339Nano), "--json").Output()
		if err != nil {
			t.Fatalf("check-limits --at %s: %v", at.Format(time.RFC3339Nano), err)
		}
		var got inForceOut
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("check-limits --json: %v\n%s", err, out)
		}
		for _, k := range got.Keys {
			var i int
			if _, err := fmt.Sscanf(k.Key, "CAL%d:ALIPAY", &i); err != nil || len(k.Windows) != 1 {
				t.Fatalf("unexpected key %+v", k)
			}
			w, pw := wins[i], k.Windows[0]
			start, err1 := time.Parse(time.RFC3339, pw.PeriodStart)
			end, err2 := time.Parse(time.RFC3339, pw.PeriodEnd)
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: period %q .. %q does not parse", k.Key, pw.PeriodStart, pw.PeriodEnd)
			}
			label := func(x time.Time) int64 {
				p, err := witness.CalendarPeriod(w.calendar, w.zone, w.cutoffMin, x)
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			want := label(at)
			if label(start) != want || label(start.Add(-time.Microsecond)) == want || label(end) == want || label(end.Add(-time.Microsecond)) != want {
				t.Errorf("seed %d: %s per %s from %02d:%02d %s at %s: payserver's period %s .. %s, the witness's period %d starts and ends elsewhere (witness: start %d, before it %d, end %d, before it %d)",
					run.seed, k.Key, w.calendar, w.cutoffMin/60, w.cutoffMin%60, w.zone, at.In(mustZone(t, w.zone)).Format(time.RFC3339),
					pw.PeriodStart, pw.PeriodEnd, want, label(start), label(start.Add(-time.Microsecond)), label(end), label(end.Add(-time.Microsecond)))
			}
			checked++
		}
	}
	fmt.Printf("chaos calendar: seed %d: %d periods checked against the witness\n", run.seed, checked)
	if checked == 0 {
		t.Fatal("no period was checked: check-limits named no calendar window")
	}
	if t.Failed() {
		fmt.Fprintf(os.Stderr, "replay: CHAOS_SEED=%d make chaos\n", run.seed)
	}
}

// inForceOut is what `check-limits --at --json` prints, as far as the
// calendar check reads it.
type inForceOut struct {
	Keys []struct {
		Key     string `json:"key"`
		Windows []struct {
			PeriodStart string `json:"periodStart"`
			PeriodEnd   string `json:"periodEnd"`
		} `json:"windows"`
	} `json:"keys"`
}

// nearTransition draws an instant within a day and a half of a zone
// transition of one of calendarZones between 2010 and 2030.
func nearTransition(r *rand.Rand) time.Time {
	loc, _ := time.LoadLocation(calendarZones[r.IntN(len(calendarZones))])
	t := time.Unix(1262304000+r.Int64N(20*365*86400), 0).In(loc) // 2010..2030
	if _, end := t.ZoneBounds(); !end.IsZero() {
		t = end
	}
	return t.Add(time.Duration(r.Int64N(int64(72*time.Hour))) - 36*time.Hour).Truncate(time.Minute).Add(time.Duration(r.IntN(3)-1) * time.Microsecond)
}

func mustZone(t *testing.T, name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
