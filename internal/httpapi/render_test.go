package httpapi_test

import (
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
		a := s.get(t, "/reports/channel-limits?"+q, "tok")
		if a.status != 400 || !strings.Contains(a.body, `"field":"to"`) {
			t.Errorf("%s: status %d: %q; want 400 naming to", q, a.status, a.body)
		}
	}
}

// TestAnswerEncodedBeforeStatus: when an answer cannot be encoded, the
// client gets a 500 JSON error, never a 200 with an empty or cut body.
func TestAnswerEncodedBeforeStatus(t *testing.T) {
	s := newTestServer(t, "tok")
	s.reports.rep.Rows = append(s.reports.rep.Rows, stats.ReportRow{BizType: "PAY", Channel: "ALIPAY",
		Bucket: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), LimitChanges: []string{}})
	a := s.get(t, "/reports/channel-limits?"+window, "tok")
	if a.status != 500 || !strings.Contains(a.body, `"code":"INTERNAL"`) {
		t.Errorf("status %d: %q; want 500 INTERNAL", a.status, a.body)
	}
}
