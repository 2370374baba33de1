package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// TestQuotaScheduleSwitchesOnTime: "we are down for maintenance 02:00-04:00"
// as a schedule with limits: 0, in the document since the start: two
// instances close the key within a second of `from` and reopen it within a
// second of `to`, each on its own clock, with no document published at
// those moments.
func TestQuotaScheduleSwitchesOnTime(t *testing.T) {
	biz, ch := testutil.UniqueName("QW"), testutil.UniqueName("QCH")
	from := time.Now().Add(15 * time.Second).Truncate(time.Second)
	to := from.Add(4 * time.Second)
	path := filepath.Join(t.TempDir(), "limits.yaml")
	mustWrite(t, path, fmt.Sprintf("limits:\n  %[1]s:%[2]s: 1000\nschedules:\n  - {key: \"%[1]s:%[2]s\", from: %[3]q, to: %[4]q, limits: 0}\n",
		biz, ch, from.Format(time.RFC3339), to.Format(time.RFC3339)))
	dsn := testutil.MustFreshMySQL(t)
	cfg := fmt.Sprintf("channels:\n  %s: {}\n", ch)
	servers := []*server{
		startServer(t, serverOptions{LimitsPath: path, DSN: dsn, Config: cfg}),
		startServer(t, serverOptions{LimitsPath: path, DSN: dsn, Config: cfg}),
	}
	if time.Until(from) < 2*time.Second {
		t.Skipf("the servers took too long to start (schedule starts in %v); nothing to measure", time.Until(from))
	}
	type switches struct{ closedAt, reopenedAt time.Time }
	got := make([]switches, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(to.Add(3 * time.Second)) {
				r := payAmount(t, s, biz, ch, 100, "CNY")
				// The instance decided before the answer came back at at:
				// at bounds the lag from above, and a closure is early only
				// if its answer came back before from.
				at := time.Now()
				switch {
				case r.Status == 429 && strings.Contains(string(r.Body), `"closed":true`):
					if at.Before(from) {
						t.Errorf("instance %d closed by %v, before the schedule's from %v", i, at, from)
					}
					if got[i].closedAt.IsZero() {
						got[i].closedAt = at
					}
				case r.Status == 200:
					if !got[i].closedAt.IsZero() && got[i].reopenedAt.IsZero() {
						got[i].reopenedAt = at
					}
				default:
					t.Errorf("instance %d: %d %s", i, r.Status, r.Body)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	for i, g := range got {
		if g.closedAt.IsZero() || g.reopenedAt.IsZero() {
			t.Fatalf("instance %d: closed at %v, reopened at %v; want both", i, g.closedAt, g.reopenedAt)
		}
		closeLag, reopenLag := g.closedAt.Sub(from), g.reopenedAt.Sub(to)
		t.Logf("instance %d closed %v after from, reopened %v after to", i, closeLag, reopenLag)
		if reopenLag < 0 {
			t.Errorf("instance %d admitted again by %v, before the schedule's to %v", i, g.reopenedAt, to)
		}
		if closeLag > time.Second || reopenLag > time.Second {
			t.Errorf("instance %d switched %v after from and %v after to; want within 1s", i, closeLag, reopenLag)
		}
	}
}

// TestQuotaNacosSchedules: a document with schedules published to the real
// Nacos is applied (GET /limits shows the active and the upcoming schedule
// and the rule in force), removing a schedule is a change in the audit
// history, and a document with overlapping schedules is refused while the
// last good one stays in force.
func TestQuotaNacosSchedules(t *testing.T) {
	nacos := testutil.Env(t, "PAYSERVER_TEST_NACOS_ADDR")
	dataID := testutil.UniqueName("quota-schedules")
	biz, ch := testutil.UniqueName("QN"), testutil.UniqueName("QCH")
	key, wide := biz+":"+ch, "*:"+ch
	now := time.Now().UTC().Truncate(time.Second)
	active := fmt.Sprintf("  - {key: %q, from: %q, to: %q, limits: 0}\n", key, now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	upcoming := fmt.Sprintf("  - {key: %q, from: \"2099-12-01T02:00:00+08:00\", to: \"2099-12-01T04:00:00+08:00\", limits: [{limit: 5, window: 1s}]}\n", wide)
	base := fmt.Sprintf("zone: Asia/Shanghai\nlimits:\n  %s: 100\n  %q: [{limit: 200, window: 1s, reserve: {REFUND: 40}}]\nschedules:\n", key, wide)
	nacosPublish(t, nacos, dataID, base+active+upcoming)
	t.Cleanup(func() { nacosDelete(t, nacos, dataID) })
	s := startServer(t, serverOptions{Env: map[string]string{"PAYSERVER_NACOS_ADDR": nacos, "PAYSERVER_NACOS_DATA_ID": dataID},
		Config: fmt.Sprintf("channels:\n  %s: {}\n", ch)})
	waitFor(t, "the document from Nacos", 10*time.Second, func() bool { return limitsRule(t, s, key) != "" })

	l := s.do(t, http.MethodGet, "/limits", nil, nil).JSON(t)
	if l["zone"] != "Asia/Shanghai" {
		t.Errorf("zone = %v", l["zone"])
	}
	var states []string
	for _, sc := range l["schedules"].([]any) {
		m := sc.(map[string]any)
		states = append(states, fmt.Sprint(m["key"], " ", m["state"], " ", m["rule"]))
	}
	if want := []string{wide + " upcoming 5/1s", key + " active 0/1s"}; fmt.Sprint(states) != fmt.Sprint(want) {
		t.Errorf("schedules = %q, want %q", states, want)
	}
	if e := limitEntry(t, s, key); e["closed"] != true || e["schedule"] == nil {
		t.Errorf("GET /limits %s = %v, want closed by its active schedule", key, e)
	}
	d := limitedDetails(t, payAmount(t, s, biz, ch, 100, "CNY"))
	wantDetail(t, d, "closed", true)

	// Remove the active schedule: the key reopens, and the history says so.
	nacosPublish(t, nacos, dataID, base+upcoming)
	waitFor(t, "the schedule's removal", 10*time.Second, func() bool { return payAmount(t, s, biz, ch, 100, "CNY").Status == 200 })
	var page struct {
		Entries []struct {
			Kind string   `json:"kind"`
			Diff []string `json:"diff"`
		} `json:"entries"`
	}
	waitFor(t, "the change in the history", 10*time.Second, func() bool {
		r := s.do(t, http.MethodGet, "/limits/history?limit=10", nil, nil)
		return json.Unmarshal(r.Body, &page) == nil && len(page.Entries) > 0 && page.Entries[0].Kind == "change"
	})
	want := fmt.Sprintf("schedule %s %s/%s: 0/1s -> absent", key, now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	if got := page.Entries[0].Diff; len(got) != 1 || got[0] != want {
		t.Errorf("history diff = %q, want [%q]", got, want)
	}

	// Overlapping schedules: refused, the last good document stays.
	overlap := fmt.Sprintf("  - {key: %q, from: \"2099-12-01T03:00:00+08:00\", to: \"2099-12-01T05:00:00+08:00\", limits: 0}\n", wide)
	nacosPublish(t, nacos, dataID, base+upcoming+overlap)
	waitFor(t, "the refusal", 10*time.Second, func() bool {
		lr := s.do(t, http.MethodGet, "/limits", nil, nil).JSON(t)["lastRefusal"].(map[string]any)
		return strings.Contains(lr["error"].(string), fmt.Sprintf("schedules of key %q overlap", wide))
	})
	if r := payAmount(t, s, biz, ch, 100, "CNY"); r.Status != 200 {
		t.Errorf("after the refused document: %d %s, want the last good limits (open)", r.Status, r.Body)
	}
}
