package console_test

import (
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/configcenter"
	"payserver/internal/console"
	"payserver/internal/console/consoletest"
	"payserver/internal/limits"
	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// TestDashboardRefusalHasTimeAndSupersession: the last refused document
// shows when it was refused and that a later good document superseded it.
func TestDashboardRefusalHasTimeAndSupersession(t *testing.T) {
	s := newTestServer(t, "")
	page := s.Get(t, "/dashboard", "").Body
	for _, want := range []string{`id="last-refusal"`, "2026-03-01 08:30:20 UTC", "superseded"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestDashboardFilterAndPaging: bizType and channel filter the keys, and
// pages of pageSize keys are shown with links to the others; bad
// parameters are a 400 naming the field.
func TestDashboardFilterAndPaging(t *testing.T) {
	s := newTestServer(t, "")
	has := func(page, key string) bool { return strings.Contains(page, `data-key="`+key+`"`) }
	t.Run("bizType", func(t *testing.T) {
		page := s.Get(t, "/dashboard?bizType=PAY", "").Body
		if !has(page, "PAY:ALIPAY") || !has(page, "PAY:UNIONPAY") || has(page, "SHOP:ALIPAY") || has(page, "DOWN:ALIPAY") {
			t.Errorf("bizType=PAY shows other keys or misses PAY ones")
		}
	})
	t.Run("channel", func(t *testing.T) {
		page := s.Get(t, "/dashboard?channel=ALIPAY", "").Body
		if !has(page, "PAY:ALIPAY") || !has(page, "SHOP:ALIPAY") || has(page, "PAY:WECHAT") {
			t.Errorf("channel=ALIPAY shows other channels or misses ALIPAY keys")
		}
	})
	t.Run("pages", func(t *testing.T) {
		// Sorted keys: DOWN:ALIPAY PAY:ALIPAY PAY:UNIONPAY PAY:WECHAT SHOP:ALIPAY other:WECHAT.
		page := s.Get(t, "/dashboard?pageSize=2&page=2", "").Body
		if !has(page, "PAY:UNIONPAY") || !has(page, "PAY:WECHAT") || has(page, "PAY:ALIPAY") || has(page, "SHOP:ALIPAY") {
			t.Errorf("page 2 of 2 keys shows the wrong keys")
		}
		for _, want := range []string{"keys 3–4 of 6", `href="/dashboard?page=1&amp;pageSize=2"`, `href="/dashboard?page=3&amp;pageSize=2"`} {
			if !strings.Contains(page, want) {
				t.Errorf("page lacks %q", want)
			}
		}
	})
	for _, bad := range []struct{ q, said string }{
		{"pageSize=0", `pageSize &#34;0&#34; must be a whole number from 1 to 200; showing page 1 of 50 keys.`},
		{"pageSize=1000", `pageSize &#34;1000&#34; must be`}, {"page=0", `page &#34;0&#34; must be`}, {"page=x", `page &#34;x&#34; must be`},
		{"bizType=a%20b", `bizType &#34;a b&#34; must contain only A-Z, 0-9 and _ (or is &#34;other&#34;); showing every bizType.`},
		{"channel=%3Cb%3E", `channel &#34;&lt;b&gt;&#34; must contain only`}, {"sort=key", `sort &#34;key&#34; is not a parameter of this route`},
	} {
		t.Run(bad.q, func(t *testing.T) {
			a := s.Get(t, "/dashboard?"+bad.q, "")
			wantDashboardProblem(t, a, bad.said)
			if !has(a.Body, "PAY:ALIPAY") {
				t.Error("the page does not show the keys beside the problem")
			}
		})
	}
}

// TestDashboardLowercaseFilter: a code typed in lower case is answered with
// the dashboard (400), saying why, showing every bizType, keeping what was
// typed in the form and linking to the upper-case filter; not a JSON error.
func TestDashboardLowercaseFilter(t *testing.T) {
	s := newTestServer(t, "")
	a := s.Get(t, "/dashboard?bizType=pay&channel=ALIPAY", "")
	wantDashboardProblem(t, a, `bizType &#34;pay&#34; must contain only A-Z, 0-9 and _ (or is &#34;other&#34;); showing every bizType. `+
		`Codes are upper case: <a href="/dashboard?bizType=PAY&amp;channel=ALIPAY&amp;page=1&amp;pageSize=50">show PAY</a>.`)
	for _, want := range []string{`name="bizType" value="pay"`, `name="channel" value="ALIPAY"`, `data-key="SHOP:ALIPAY"`} {
		if !strings.Contains(a.Body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(a.Body, `data-key="PAY:WECHAT"`) {
		t.Error("the valid channel filter was not applied")
	}
}

// wantDashboardProblem checks that a is the dashboard page, answered 400,
// saying said above the filter.
func wantDashboardProblem(t *testing.T, a consoletest.Answer, said string) {
	t.Helper()
	if a.Status != 400 || !strings.HasPrefix(a.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("status %d, %s: %.300s; want 400 and the page", a.Status, a.Header.Get("Content-Type"), a.Body)
	}
	if !strings.Contains(a.Body, `<p class="error filter-problem">`+said) {
		t.Errorf("the page does not say %q:\n%s", said, regexp.MustCompile(`(?s)<section id="filter">.*?</section>`).FindString(a.Body))
	}
}

// TestDashboardSizeAt2000Keys: with 2,000 keys the page stays small (it
// was 4.6 MB when every key was drawn on one page).
func TestDashboardSizeAt2000Keys(t *testing.T) {
	gin.SetMode(gin.TestMode)
	var doc strings.Builder
	doc.WriteString("limits:\n")
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&doc, "  B%04d:ALIPAY: %d\n", i, i+1)
	}
	parsed, err := limits.Parse([]byte(doc.String()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	lv := consoletest.LimitsView{Cfg: cfg, St: configcenter.Status{Loaded: true, Source: "file"}}
	routes, err := console.New(console.Options{Reports: &consoletest.Reports{}, Usage: consoletest.Usage{Cfg: cfg}, Limits: lv,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s := consoletest.ServeAdmin(t, "", routes)
	a := s.Get(t, "/dashboard", "")
	const maxBytes = 300 << 10
	t.Logf("DASHBOARD SIZE keys=2000 bytes=%d", len(a.Body))
	if a.Status != 200 || len(a.Body) > maxBytes {
		t.Fatalf("status %d, %d bytes; want 200 and at most %d bytes", a.Status, len(a.Body), maxBytes)
	}
	if !strings.Contains(a.Body, "keys 1–50 of 2000") {
		t.Error("the page does not say which keys of how many it shows")
	}
}

// TestDashboardYAxis: a chart's y labels are whole numbers, evenly spaced
// from 0, each at the height of the count it names; with a peak of 5 the
// middle label used to say 2 where a reader takes the middle, 2.5.
func TestDashboardYAxis(t *testing.T) {
	for _, peak := range []int64{0, 1, 3, 5, 6, 7, 11, 23, 100, 101, 4999} {
		t.Run(strconv.FormatInt(peak, 10), func(t *testing.T) {
			s := newTestServer(t, "")
			s.Reports.Rep = stats.Report{Rows: []stats.ReportRow{{BizType: "PAY", Channel: "ALIPAY",
				Bucket: consoletest.Now.Truncate(time.Minute).Add(-time.Minute), Admitted: peak, Limit: "100/1s", LimitChanges: []string{}}}}
			page := s.Get(t, "/dashboard?bizType=PAY&channel=ALIPAY", "").Body
			chart := regexp.MustCompile(`(?s)<svg class="history-chart" data-key="PAY:ALIPAY".*?</svg>`).FindString(page)
			labels := regexp.MustCompile(`dx="-6" y="([0-9.]+)"[^>]*>([^<]*)</text>`).FindAllStringSubmatch(chart, -1)
			base := regexp.MustCompile(`y1="([0-9.]+)" y2="[0-9.]+" stroke="#98a2b3"`).FindStringSubmatch(chart)
			if len(labels) < 2 || base == nil {
				t.Fatalf("no y labels or zero line:\n%s", chart)
			}
			zero, _ := strconv.ParseFloat(base[1], 64)
			var values []int64
			var top, topAt float64
			for _, l := range labels {
				n, err := strconv.ParseInt(l[2], 10, 64)
				if err != nil {
					t.Fatalf("y label %q is not a whole number", l[2])
				}
				values = append(values, n)
				if at, _ := strconv.ParseFloat(l[1], 64); float64(n) > top {
					top, topAt = float64(n), at
				}
			}
			sort.Slice(values, func(i, j int) bool { return values[i] < values[j] })
			if values[0] != 0 || top < float64(peak) || len(values) > 6 {
				t.Errorf("y labels %v: want 0 first, the top at or above %d, at most 6 labels", values, peak)
			}
			for i := 2; i < len(values); i++ {
				if values[i]-values[i-1] != values[1]-values[0] {
					t.Errorf("y labels %v are not evenly spaced", values)
					break
				}
			}
			for _, l := range labels {
				n, _ := strconv.ParseFloat(l[2], 64)
				at, _ := strconv.ParseFloat(l[1], 64)
				if want := zero - (zero-topAt)*n/top; math.Abs(at-want) > 0.05 {
					t.Errorf("y label %v stands at %.1f, the height of %.2f", n, at, top*(zero-at)/(zero-topAt))
				}
			}
		})
	}
}

// TestDashboardLimitChangeWithoutTraffic: a key whose limit changed in the
// hour without any traffic still shows the "limit changed" badge, with the
// change in its tooltip.
func TestDashboardLimitChangeWithoutTraffic(t *testing.T) {
	s := newTestServer(t, "")
	s.Reports.KeyChanges = []stats.KeyChange{{Bucket: consoletest.Now.Truncate(time.Minute).Add(-5 * time.Minute),
		Key: ratelimit.Key{BizType: "SHOP", Channel: "ALIPAY"}, Changes: []string{"4/1m -> 8/1m (shadow)"}}}
	page := s.Get(t, "/dashboard", "").Body
	chart := regexp.MustCompile(`(?s)<div class="chart">\s*<h3><span class="key">SHOP:ALIPAY</span>.*?</h3>`).FindString(page)
	if !strings.Contains(chart, `title="10:25 4/1m -&gt; 8/1m (shadow)">limit changed</span>`) {
		t.Errorf("SHOP:ALIPAY (no traffic, limit changed) has no badge with the change:\n%s", chart)
	}
	if n := strings.Count(page, ">limit changed<"); n != 2 {
		t.Errorf("%d limit changed badges, want 2 (PAY:ALIPAY from its rows, SHOP:ALIPAY from the history)", n)
	}
}

// TestDashboardReadsOnlyItsPage: the dashboard reads the hour's rows of
// the keys of its page and of the "other" and resolver buckets, never of every key
// (with 10,000 keys the whole hour is 600,000 rows); a key removed from
// the document in the hour keeps its chart.
func TestDashboardReadsOnlyItsPage(t *testing.T) {
	s := newTestServer(t, "")
	s.Reports.KeyChanges = []stats.KeyChange{{Bucket: consoletest.Now.Truncate(time.Minute).Add(-5 * time.Minute),
		Key: ratelimit.Key{BizType: "GONE", Channel: "ALIPAY"}, Changes: []string{"7/1s -> absent"}}}
	// Sorted keys: DOWN:ALIPAY GONE:ALIPAY PAY:ALIPAY PAY:UNIONPAY PAY:WECHAT SHOP:ALIPAY other:WECHAT.
	page := s.Get(t, "/dashboard?pageSize=3", "").Body
	for key, want := range map[string]bool{"DOWN:ALIPAY": true, "GONE:ALIPAY": true, "PAY:ALIPAY": true, "PAY:UNIONPAY": false, "other:WECHAT": false} {
		if got := strings.Contains(page, `<svg class="history-chart" data-key="`+key+`"`); got != want {
			t.Errorf("chart of %s on page 1 of 3 keys: %v, want %v", key, got, want)
		}
	}
	if !strings.Contains(page, "9 admitted · 3 limited") {
		t.Error("PAY:ALIPAY's chart lacks its rows")
	}
	var asked []string
	for _, q := range s.Reports.Reported {
		if len(q.Keys) == 0 && q.BizType != stats.Other && q.BizType != ratelimit.ResolveBizType {
			t.Errorf("the dashboard read every key's hour: %+v", q)
		}
		for _, k := range q.Keys {
			asked = append(asked, k.String())
		}
	}
	if want := []string{"DOWN:ALIPAY", "GONE:ALIPAY", "PAY:ALIPAY"}; !reflect.DeepEqual(asked, want) {
		t.Errorf("rows read for %v, want the page's keys %v", asked, want)
	}
	last := s.Get(t, "/dashboard?pageSize=3&page=3", "").Body
	if !strings.Contains(last, `<svg class="history-chart" data-key="other:WECHAT"`) || !strings.Contains(last, "4 admitted · 0 limited") {
		t.Error("the last page lacks the other:WECHAT bucket and its rows")
	}
}

// TestDashboardRuleWindowsWrapWhole: a long rule is written in a line of
// its own under the totals, one unbreakable part per window, so that it
// wraps between windows (a zone's "+" is not a boundary).
func TestDashboardRuleWindowsWrapWhole(t *testing.T) {
	s := newTestServer(t, "")
	s.Reports.Rep = stats.Report{Rows: []stats.ReportRow{{BizType: "PAY", Channel: "ALIPAY", Bucket: consoletest.Now.Truncate(time.Minute),
		Admitted: 1, Limit: "500/1m+300000/day[23:00 Etc/GMT+8]+amount 500000000 CNY/day[00:00 Asia/Shanghai]", LimitChanges: []string{}}}}
	page := s.Get(t, "/dashboard?bizType=PAY&channel=ALIPAY", "").Body
	want := `<div class="rule">limit <span class="window">500/1m</span> +<wbr> <span class="window">300000/day[23:00 Etc/GMT&#43;8]</span> +<wbr> ` +
		`<span class="window">amount 500000000 CNY/day[00:00 Asia/Shanghai]</span></div>`
	if !strings.Contains(page, want) {
		t.Errorf("page lacks %s:\n%s", want, regexp.MustCompile(`(?s)<div class="chart">.*?<svg`).FindString(page))
	}
}

// TestDashboardOtherAmountsExplained: an "other" channel or currency in
// the amounts says what it adds up.
func TestDashboardOtherAmountsExplained(t *testing.T) {
	s := newTestServer(t, "")
	for _, tt := range []struct {
		name        string
		amounts     []stats.AmountBucket
		want, avoid []string
	}{
		{"none", []stats.AmountBucket{{Channel: "ALIPAY", Currency: "CNY", Admitted: 1, AdmittedAmount: 5}},
			nil, []string{`id="other-channel"`, `id="other-currency"`}},
		{"currency", []stats.AmountBucket{{Channel: "ALIPAY", Currency: "other", Admitted: 1, AdmittedAmount: 5}},
			[]string{`other<sup>†</sup>`, `id="other-currency"`, "currency was missing or not a three-letter upper-case code"}, []string{`id="other-channel"`}},
		{"channel", []stats.AmountBucket{{Channel: "other", Currency: "USD", Refused: 1, RefusedAmount: 5}},
			[]string{`other<sup>*</sup>`, `id="other-channel"`, "every channel the limits document names no key on"}, []string{`id="other-currency"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s.Reports.AmountRows = tt.amounts
			section := regexp.MustCompile(`(?s)<section id="amounts">.*?</section>`).FindString(s.Get(t, "/dashboard", "").Body)
			for _, w := range tt.want {
				if !strings.Contains(section, w) {
					t.Errorf("amounts lack %q:\n%s", w, section)
				}
			}
			for _, a := range tt.avoid {
				if strings.Contains(section, a) {
					t.Errorf("amounts have %q", a)
				}
			}
		})
	}
}
