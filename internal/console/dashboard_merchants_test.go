package console_test

import (
	"errors"
	"strings"
	"testing"

	"payserver/internal/stats"
)

// TestDashboardTopMerchants: the dashboard lists, per key of its page, the
// hour's merchants with the most requests and with the most refusals,
// summed over the minutes; a merchant without refusals is not listed by
// refusals; an ID holding a separator or a space is quoted, so that the
// list reads as its merchants; a failing stats database is said in the
// section.
func TestDashboardTopMerchants(t *testing.T) {
	s := newTestServer(t, "tok")
	row := func(m string, admitted, refused int64) stats.MerchantReportRow {
		return stats.MerchantReportRow{BizType: "PAY", Channel: "ALIPAY", Merchant: m, Attempts: admitted + refused, Admitted: admitted, Refused: refused}
	}
	s.Reports.MerchantRows = []stats.MerchantReportRow{
		row("M_BIG", 90, 0), row("M_FLASH", 10, 40), row("-", 5, 1), row("M_BIG", 30, 0), row(stats.Other, 2, 0), row("a, b ", 1, 0),
	}
	tests := []struct {
		name string
		err  error
		want []string
	}{
		{"counts", nil, []string{
			`<tr class="merchants" data-key="PAY:ALIPAY">`,
			`<span class="key">M_BIG</span> 120 (0), <span class="key">M_FLASH</span> 50 (40), <span class="key">-</span> 6 (1), <span class="key">other</span> 2 (0), <span class="key">&#34;a, b &#34;</span> 1 (0)`,
			`<span class="key">M_FLASH</span> 40 of 50, <span class="key">-</span> 1 of 6</td>`,
		}},
		{"database down", errors.New("dial tcp: connection refused"), []string{"the top merchants are missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.Reports.Err = tt.err
			defer func() { s.Reports.Err = nil }()
			page := s.Get(t, "/dashboard", "tok").Body
			for _, want := range tt.want {
				if !strings.Contains(page, want) {
					t.Errorf("dashboard lacks %q", want)
				}
			}
		})
	}
}
