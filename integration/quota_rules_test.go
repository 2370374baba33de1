package integration

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// TestQuotaAmountPerDay: "at most 5,000,000.00 CNY per natural day
// (Asia/Shanghai)" on real Redis and MariaDB, scaled down: a payment is
// admitted only if it fits (so a small one passes after a large one was
// refused), the 429 names amount/day with the cap, what is used and the
// time until Shanghai's next midnight, a retried requestId is not counted
// twice, GET /limits shows the use, and the amounts report has the
// admitted and refused sums.
func TestQuotaAmountPerDay(t *testing.T) {
	biz := testutil.UniqueName("QA")
	s, ch := quotaServer(t, "", func(ch string) string {
		return fmt.Sprintf("zone: Asia/Shanghai\nlimits:\n  %s:%s:\n    - {limit: 100, window: 1s}\n    - {amount: 10000, calendar: day}\n", biz, ch)
	})
	if r := payAmount(t, s, biz, ch, 6000, "CNY", "QA-first"); r.Status != 200 {
		t.Fatalf("6000: %d %s", r.Status, r.Body)
	}
	d := limitedDetails(t, payAmount(t, s, biz, ch, 5000, "CNY"))
	wantDetail(t, d, "rule", "amount/day")
	wantDetail(t, d, "amount", 10000)
	wantDetail(t, d, "used", 6000)
	wantDetail(t, d, "limit", nil)
	wantDetail(t, d, "windowMs", nil)
	wantRetryNear(t, d, time.Until(nextStart(t, "Asia/Shanghai", 0, 0, time.Now())), 5*time.Second)
	if r := payAmount(t, s, biz, ch, 4000, "CNY"); r.Status != 200 {
		t.Fatalf("4000 after a refused 5000: %d %s, want admitted (it fits)", r.Status, r.Body)
	}
	if r := payAmount(t, s, biz, ch, 6000, "CNY", "QA-first"); r.Status != 200 {
		t.Fatalf("retry of the first requestId: %d %s, want its order again", r.Status, r.Body)
	}
	limitedDetails(t, payAmount(t, s, biz, ch, 1, "CNY"))
	e := limitEntry(t, s, biz+":"+ch)
	if e == nil {
		t.Fatal("GET /limits does not list the key")
	}
	day := e["windows"].([]any)[1].(map[string]any)
	if day["rule"] != "amount/day" || day["calendar"] != "day" || day["zone"] != "Asia/Shanghai" || day["used"] != float64(10000) {
		t.Errorf("GET /limits day window = %v, want amount/day in Asia/Shanghai using 10000 (the retry not counted twice)", day)
	}
	q := url.Values{"from": {time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}, "to": {time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
		"granularity": {"hour"}, "channel": {ch}}
	rep := s.do(t, http.MethodGet, "/reports/channel-amounts?"+q.Encode(), nil, nil).JSON(t)
	var admitted, admittedAmount, refused, refusedAmount float64
	for _, r := range rep["rows"].([]any) {
		row := r.(map[string]any)
		if row["currency"] != "CNY" {
			t.Errorf("row %v, want CNY only", row)
		}
		admitted += row["admitted"].(float64)
		admittedAmount += row["admittedAmount"].(float64)
		refused += row["refused"].(float64)
		refusedAmount += row["refusedAmount"].(float64)
	}
	// The retried requestId is answered from its order, without a
	// limiter decision.
	if admitted != 2 || admittedAmount != 10000 || refused != 2 || refusedAmount != 5001 {
		t.Errorf("amounts report: admitted %v/%v refused %v/%v, want 2/10000 and 2/5001", admitted, admittedAmount, refused, refusedAmount)
	}
}

// TestQuotaCountPerDayFromCutoff: "300,000 transactions per day; the
// channel's day runs 23:00 to 23:00", scaled down: the 429 says count/day
// and the time until the next 23:00 in Shanghai.
func TestQuotaCountPerDayFromCutoff(t *testing.T) {
	biz := testutil.UniqueName("QC")
	s, ch := quotaServer(t, "", func(ch string) string {
		return fmt.Sprintf("zone: Asia/Shanghai\nlimits:\n  %s:%s: [{limit: 2, calendar: day, cutoff: \"23:00\"}]\n", biz, ch)
	})
	for i := 0; i < 2; i++ {
		if r := payAmount(t, s, biz, ch, 1999, "CNY"); r.Status != 200 {
			t.Fatalf("payment %d: %d %s", i, r.Status, r.Body)
		}
	}
	d := limitedDetails(t, payAmount(t, s, biz, ch, 1999, "CNY"))
	wantDetail(t, d, "rule", "count/day")
	wantDetail(t, d, "limit", 2)
	wantDetail(t, d, "used", 2)
	wantRetryNear(t, d, time.Until(nextStart(t, "Asia/Shanghai", 23, 0, time.Now())), 5*time.Second)
}

// TestQuotaAmountSliding: a sliding money cap {amount: 5000, window: 60s}.
func TestQuotaAmountSliding(t *testing.T) {
	biz := testutil.UniqueName("QS")
	s, ch := quotaServer(t, "", func(ch string) string {
		return fmt.Sprintf("limits:\n  %s:%s: [{amount: 5000, window: 60s}]\n", biz, ch)
	})
	if r := payAmount(t, s, biz, ch, 3000, "CNY"); r.Status != 200 {
		t.Fatalf("3000: %d %s", r.Status, r.Body)
	}
	d := limitedDetails(t, payAmount(t, s, biz, ch, 3000, "CNY"))
	wantDetail(t, d, "rule", "amount/1m") // 60s is written 1m
	wantDetail(t, d, "amount", 5000)
	wantDetail(t, d, "used", 3000)
	wantDetail(t, d, "windowMs", 60000)
	wantRetryNear(t, d, time.Minute, 5*time.Second)
	if r := payAmount(t, s, biz, ch, 2000, "CNY"); r.Status != 200 {
		t.Fatalf("2000: %d %s, want admitted (it fits)", r.Status, r.Body)
	}
}

// TestQuotaCurrency: a cap with a currency counts only that currency, and
// a payment larger than the cap is refused without a Retry-After.
func TestQuotaCurrency(t *testing.T) {
	biz := testutil.UniqueName("QY")
	s, ch := quotaServer(t, "", func(ch string) string {
		return fmt.Sprintf("limits:\n  %s:%s: [{amount: 5000, calendar: day, currency: CNY}]\n", biz, ch)
	})
	if r := payAmount(t, s, biz, ch, 9000, "USD"); r.Status != 200 {
		t.Fatalf("9000 USD under a CNY cap: %d %s, want admitted uncounted", r.Status, r.Body)
	}
	r := payAmount(t, s, biz, ch, 6000, "CNY")
	d := limitedDetails(t, r)
	wantDetail(t, d, "exceedsCap", true)
	wantDetail(t, d, "used", 0)
	if ra := r.Header.Get("Retry-After"); ra != "" {
		t.Errorf("Retry-After %q on an amount above its cap, want none", ra)
	}
	if r := payAmount(t, s, biz, ch, 5000, "CNY"); r.Status != 200 {
		t.Fatalf("5000 CNY: %d %s, want admitted", r.Status, r.Body)
	}
}

// TestQuotaDeclinedGivesAmountBack: on a calendar-day amount window (stored
// apart from sliding windows' sorted sets, so given back by another path
// than TestAmountGivenBackOnlyWhenNoMoneyMoved's sliding one), a payment the
// channel declined gives its amount back, so the next ones fit; an UNKNOWN
// one keeps it.
func TestQuotaDeclinedGivesAmountBack(t *testing.T) {
	biz := testutil.UniqueName("QD")
	declining, ch := quotaServer(t, "declineRate: 1", func(ch string) string {
		return fmt.Sprintf("limits:\n  %s:%s: [{amount: 5000, calendar: day}]\n", biz, ch)
	})
	for i := 0; i < 3; i++ {
		r := payAmount(t, declining, biz, ch, 4000, "CNY")
		if r.Status != 200 || r.JSON(t)["status"] != "FAILED" {
			t.Fatalf("declined payment %d: %d %s, want 200 FAILED (the earlier declines gave their amount back)", i, r.Status, r.Body)
		}
	}
	hanging, ch2 := quotaServer(t, "timeoutRate: 1", func(ch string) string {
		return fmt.Sprintf("limits:\n  %s:%s: [{amount: 5000, calendar: day}]\n", biz, ch)
	})
	if r := payAmount(t, hanging, biz, ch2, 4000, "CNY"); r.Status != 200 || r.JSON(t)["status"] != "UNKNOWN" {
		t.Fatalf("timed-out payment: %d %s, want 200 UNKNOWN", r.Status, r.Body)
	}
	d := limitedDetails(t, payAmount(t, hanging, biz, ch2, 4000, "CNY"))
	wantDetail(t, d, "used", 4000)
}

// TestQuotaChannelWideWithReserve: "*:CHANNEL" counts every bizType on the
// channel together, checked with each bizType's own key; REFUND's
// reservation keeps part of it from the others, and the 429 names the
// channel-wide scope.
func TestQuotaChannelWideWithReserve(t *testing.T) {
	pay, refund := testutil.UniqueName("QP"), testutil.UniqueName("QR")
	s, ch := quotaServer(t, "", func(ch string) string {
		return fmt.Sprintf("limits:\n  %[1]s:%[3]s: 100\n  %[2]s:%[3]s: 100\n  \"*:%[3]s\":\n    - {limit: 3, window: 1m, reserve: {%[2]s: 1}}\n", pay, refund, ch)
	})
	for i := 0; i < 2; i++ {
		if r := payAmount(t, s, pay, ch, 100, "CNY"); r.Status != 200 {
			t.Fatalf("%s payment %d: %d %s", pay, i, r.Status, r.Body)
		}
	}
	d := limitedDetails(t, payAmount(t, s, pay, ch, 100, "CNY"))
	wantDetail(t, d, "scope", "*:"+ch)
	wantDetail(t, d, "rule", "count/1m")
	wantDetail(t, d, "limit", 3) // the whole limit: 2 used and 1 kept for the reservation
	wantDetail(t, d, "bizType", pay)
	if r := payAmount(t, s, refund, ch, 100, "CNY"); r.Status != 200 {
		t.Fatalf("%s (reserved) payment: %d %s, want admitted", refund, r.Status, r.Body)
	}
	d = limitedDetails(t, payAmount(t, s, refund, ch, 100, "CNY"))
	wantDetail(t, d, "scope", "*:"+ch)
	wantDetail(t, d, "limit", 3)
	e := limitEntry(t, s, "*:"+ch)
	if e == nil || e["channelWide"] != true {
		t.Fatalf("GET /limits entry of *:%s = %v, want a channel-wide key", ch, e)
	}
	w := e["windows"].([]any)[0].(map[string]any)
	if w["used"] != float64(3) || w["reserve"].(map[string]any)[refund] != float64(1) {
		t.Errorf("GET /limits *:%s window = %v, want used 3 and reserve %s: 1", ch, w, refund)
	}
	// The bizType's own key is checked too: its limit binds without scope.
	own := testutil.UniqueName("QO")
	s2, ch2 := quotaServer(t, "", func(ch string) string {
		return fmt.Sprintf("limits:\n  %[1]s:%[2]s: {limit: 1, window: 1m}\n  \"*:%[2]s\": 100\n", own, ch)
	})
	if r := payAmount(t, s2, own, ch2, 100, "CNY"); r.Status != 200 {
		t.Fatalf("first payment: %d %s", r.Status, r.Body)
	}
	d = limitedDetails(t, payAmount(t, s2, own, ch2, 100, "CNY"))
	wantDetail(t, d, "scope", nil)
	wantDetail(t, d, "limit", 1)
}
