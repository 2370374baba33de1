package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// TestLimitsHistoryEndpoint runs the binary on MariaDB with a watched file:
// the start is recorded as a load (not a change, so the report shows no
// limit change after a start), a comment-only edit as unchanged, a bad
// document as refused (persisted, with its reason), and a real edit as a
// change; GET /limits/history pages them newest first, and a closed key
// answers 429 without Retry-After.
func TestLimitsHistoryEndpoint(t *testing.T) {
	biz := testutil.UniqueName("HIST")
	path := filepath.Join(t.TempDir(), "limits.yaml")
	doc := func(n int) string { return fmt.Sprintf("limits:\n  %[1]s:ALIPAY: %[2]d\n  %[1]s:WECHAT: 0\n", biz, n) }
	mustWrite(t, path, doc(5))
	s := startServer(t, serverOptions{LimitsPath: path})
	if r := s.pay(t, payBody("hist-1", biz, "ALIPAY")); r.Status != 200 {
		t.Fatalf("pay: %d %s", r.Status, r.Body)
	}
	closed := s.pay(t, payBody("hist-closed", biz, "WECHAT"))
	if closed.Status != 429 || closed.Header.Get("Retry-After") != "" || !strings.Contains(string(closed.Body), `"closed":true`) {
		t.Errorf("closed key: %d Retry-After=%q %s; want 429, no Retry-After, details.closed", closed.Status, closed.Header.Get("Retry-After"), closed.Body)
	}
	applied := func() float64 { return s.do(t, http.MethodGet, "/limits", nil, nil).JSON(t)["applied"].(float64) }
	refusals := func() float64 { return s.do(t, http.MethodGet, "/limits", nil, nil).JSON(t)["refusals"].(float64) }
	mustWrite(t, path, "# only a comment\n"+doc(5))
	waitFor(t, "the comment-only edit", 10*time.Second, func() bool { return applied() == 2 })
	mustWrite(t, path, "limits:\n  not a key: 1\n")
	waitFor(t, "the bad document to be refused", 10*time.Second, func() bool { return refusals() == 1 })
	mustWrite(t, path, doc(6))
	waitFor(t, "the change", 10*time.Second, func() bool { return applied() == 3 })

	var page struct {
		Entries []struct {
			Kind    string   `json:"kind"`
			Diff    []string `json:"diff"`
			Refusal *string  `json:"refusal"`
		} `json:"entries"`
		NextBefore *uint64 `json:"nextBefore"`
	}
	waitFor(t, "four history entries", 10*time.Second, func() bool {
		r := s.do(t, http.MethodGet, "/limits/history?limit=10", nil, nil)
		return r.Status == 200 && json.Unmarshal(r.Body, &page) == nil && len(page.Entries) == 4
	})
	var kinds []string
	for _, e := range page.Entries {
		kinds = append(kinds, e.Kind)
	}
	if got, want := strings.Join(kinds, ","), "change,refused,unchanged,load"; got != want {
		t.Fatalf("history kinds newest first = %s, want %s", got, want)
	}
	if e := page.Entries[1]; e.Refusal == nil || *e.Refusal == "" {
		t.Error("the refused document carries no reason")
	}
	if d := strings.Join(page.Entries[0].Diff, ";"); d != biz+":ALIPAY: 5/1s -> 6/1s" {
		t.Errorf("change diff %q", d)
	}
	if len(page.Entries[2].Diff) != 0 {
		t.Errorf("the comment-only edit has a diff: %v", page.Entries[2].Diff)
	}
	// The start's load is not a limit change in the report.
	from := time.Now().UTC().Add(-5 * time.Minute).Truncate(time.Minute).Format(time.RFC3339)
	to := time.Now().UTC().Add(2 * time.Minute).Format(time.RFC3339)
	rep := s.do(t, http.MethodGet, "/reports/channel-limits?bizType="+biz+"&from="+from+"&to="+to, nil, nil)
	var report struct {
		Rows []struct {
			Channel      string   `json:"channel"`
			LimitChanges []string `json:"limitChanges"`
			LimitChanged bool     `json:"limitChanged"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(rep.Body, &report); err != nil || rep.Status != 200 {
		t.Fatalf("report %d %s", rep.Status, rep.Body)
	}
	for _, r := range report.Rows {
		for _, c := range r.LimitChanges {
			if strings.HasPrefix(c, "absent ->") {
				t.Errorf("the start's load shows as a change in the report: %+v", r)
			}
		}
	}
}
