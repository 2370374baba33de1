package console_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"payserver/internal/stats"
)

// TestReportRangeOutOfYears: a range that ends in year 9999 or later is a
// 400 naming the field, not a 200 with an empty body.
func TestReportRangeOutOfYears(t *testing.T) {
	s := newTestServer(t, "tok")
	for _, q := range []string{
		"from=9999-12-31T00:00:00Z&to=9999-12-31T23:59:00Z&granularity=day",
		"from=9999-12-31T22:00:00Z&to=9999-12-31T23:59:59Z&granularity=hour",
	} {
		a := s.Get(t, "/reports/channel-limits?"+q, "tok")
		if a.Status != 400 || !strings.Contains(a.Body, `"field":"to"`) {
			t.Errorf("%s: status %d: %q; want 400 naming to", q, a.Status, a.Body)
		}
	}
}

// TestAnswerEncodedBeforeStatus: when an answer cannot be encoded, the
// client gets a 500 JSON error, never a 200 with an empty or cut body.
func TestAnswerEncodedBeforeStatus(t *testing.T) {
	s := newTestServer(t, "tok")
	s.Reports.Rep.Rows = append(s.Reports.Rep.Rows, stats.ReportRow{BizType: "PAY", Channel: "ALIPAY",
		Bucket: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), LimitChanges: []string{}})
	a := s.Get(t, "/reports/channel-limits?"+window, "tok")
	if a.Status != 500 || !strings.Contains(a.Body, `"code":"INTERNAL"`) {
		t.Errorf("status %d: %q; want 500 INTERNAL", a.Status, a.Body)
	}
}

// TestReportCutShortIsNoWholeAnswer: a report is streamed, so an error
// after its first bytes cannot become an error answer; the connection is
// cut instead, and the client reads an error, never a 200 whose JSON or
// CSV merely looks whole.
func TestReportCutShortIsNoWholeAnswer(t *testing.T) {
	s := newTestServer(t, "tok")
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for i := range 2000 {
		s.Reports.Rep.Rows = append(s.Reports.Rep.Rows, stats.ReportRow{BizType: "PAY", Channel: "ALIPAY",
			Bucket: at.Add(time.Duration(i%60) * time.Minute), Limit: "100/1s", LimitChanges: []string{}})
	}
	s.Reports.Rep.Rows = append(s.Reports.Rep.Rows, stats.ReportRow{BizType: "PAY", Channel: "ALIPAY",
		Bucket: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), LimitChanges: []string{}})
	req, err := http.NewRequest(http.MethodGet, s.Srv.URL+"/reports/channel-limits?"+window, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no answer: %v; want the headers of a 200 first", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatalf("status %d, %d bytes read whole; want the transfer cut short", resp.StatusCode, len(body))
	}
	if len(body) < 4096 {
		t.Fatalf("only %d bytes before the cut: the test must fail after the first bytes", len(body))
	}
}
