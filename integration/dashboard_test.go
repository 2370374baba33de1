package integration

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// chromium returns the headless browser (scripts/install-chromium.sh
// installs Debian's), skipping the test when it is missing, except under
// CI=true, where that is a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if testutil.CI() {
		t.Fatal("chromium is not installed: run scripts/install-chromium.sh")
	}
	t.Skip("chromium is not installed; run scripts/install-chromium.sh")
	return ""
}

// runChromium loads url headless with extra flags and returns its stdout.
func runChromium(t *testing.T, bin, url string, extra ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--window-size=1280,1800", // the whole top of the page, charts included
	}, extra...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", extra, err, stderr.String())
	}
	return stdout.Bytes()
}

// TestDashboardInChromium loads /dashboard in headless Chromium after some
// traffic, checks that the SVG charts rendered for the right channels, and
// saves a screenshot to integration/testdata/out/dashboard.png.
func TestDashboardInChromium(t *testing.T) {
	bin := chromium(t)
	biz := testutil.UniqueName("DASH")
	limits := fmt.Sprintf(`window: 1s
limits:
  %[1]s:ALIPAY: {limit: 6, window: 1h}
  %[1]s:WECHAT: {limit: 20, window: 1h}
  %[1]s:UNIONPAY: 0
  %[1]s:BUSYPAY: -1
`, biz)
	// No admin token: admin routes answer loopback clients, which is how a
	// browser on this host reaches them (it cannot send a bearer header).
	s := startServer(t, serverOptions{Limits: limits, Config: channelsConfig})
	for i := 0; i < 10; i++ {
		s.pay(t, payBody(fmt.Sprintf("dash-a-%d", i), biz, "ALIPAY")) // 6 admitted, 4 limited
	}
	for i := 0; i < 9; i++ {
		s.pay(t, payBody(fmt.Sprintf("dash-w-%d", i), biz, "WECHAT")) // 9 of 20
	}
	s.pay(t, payBody("dash-u-1", biz, "UNIONPAY")) // closed: limited

	// The page itself is documented and answers 200 HTML.
	if r := s.do(t, http.MethodGet, "/dashboard", nil, nil); r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("/dashboard: %d %s", r.Status, r.Header.Get("Content-Type"))
	}

	url := s.base + "/dashboard"
	dom := string(runChromium(t, bin, url, "--dump-dom"))
	for _, ch := range []string{"ALIPAY", "WECHAT", "UNIONPAY", "BUSYPAY"} {
		key := biz + ":" + ch
		for _, class := range []string{"usage-bar", "history-chart"} {
			if !strings.Contains(dom, `<svg class="`+class+`" data-key="`+key+`"`) {
				t.Errorf("rendered DOM has no %s SVG for %s", class, key)
			}
		}
	}
	chart := func(key string) string {
		re := regexp.MustCompile(`(?s)<svg class="history-chart" data-key="` + regexp.QuoteMeta(key) + `".*?</svg>`)
		return re.FindString(dom)
	}
	if c := chart(biz + ":ALIPAY"); !strings.Contains(c, `class="admitted"`) || !strings.Contains(c, `class="limited"`) {
		t.Errorf("the ALIPAY chart has no admitted and limited bars:\n%s", c)
	}
	if c := chart(biz + ":WECHAT"); !strings.Contains(c, `class="admitted"`) || strings.Contains(c, `class="limited"`) {
		t.Errorf("the WECHAT chart should show admitted bars only:\n%s", c)
	}
	if c := chart(biz + ":BUSYPAY"); !strings.Contains(c, "no traffic in the last hour") {
		t.Errorf("the BUSYPAY chart should say it saw no traffic:\n%s", c)
	}
	for _, want := range []string{"6 / 6 in 1h", "9 / 20 in 1h", "6 admitted · 4 limited (40.0%)", "Limits in force", "closed"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}

	out, err := filepath.Abs(filepath.Join("testdata", "out"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(out, "dashboard.png")
	_ = os.Remove(shot)
	runChromium(t, bin, url, "--screenshot="+shot, "--hide-scrollbars")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 1800 {
		t.Errorf("screenshot is %dx%d, want 1280x1800", b.Dx(), b.Dy())
	}
	// The bars are drawn in the chart colours: admitted green, limited red.
	green := countPixels(img, 0x2e, 0x9d, 0x5b)
	red := countPixels(img, 0xd6, 0x45, 0x45)
	if green < 50 || red < 50 {
		t.Errorf("screenshot has %d green and %d red pixels; the bars did not paint", green, red)
	}
	t.Logf("dashboard screenshot: %s (%d green, %d red bar pixels)", shot, green, red)
}

// countPixels counts the pixels within a small distance of one colour.
func countPixels(img image.Image, r, g, b uint8) int {
	n := 0
	bounds := img.Bounds()
	near := func(a uint32, want uint8) bool {
		d := int(a>>8) - int(want)
		return d > -8 && d < 8
	}
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if near(pr, r) && near(pg, g) && near(pb, b) {
				n++
			}
		}
	}
	return n
}

// TestDashboardAt2000Keys loads the dashboard with 2,000 configured keys:
// the page stays small (it was 4.6 MB when every key was drawn), shows one
// page of keys with a link to the next, and the bizType filter shows the
// one key asked for, in headless Chromium.
func TestDashboardAt2000Keys(t *testing.T) {
	bin := chromium(t)
	biz := testutil.UniqueName("DK")
	var doc strings.Builder
	doc.WriteString("limits:\n")
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&doc, "  %s%04d:ALIPAY: %d\n", biz, i, i+1)
	}
	s := startServer(t, serverOptions{Limits: doc.String(), Config: channelsConfig})
	r := s.do(t, http.MethodGet, "/dashboard", nil, nil)
	const maxBytes = 300 << 10
	t.Logf("DASHBOARD SIZE keys=2000 bytes=%d (limit %d)", len(r.Body), maxBytes)
	if r.Status != 200 || len(r.Body) > maxBytes {
		t.Fatalf("/dashboard at 2,000 keys: status %d, %d bytes; want 200 and at most %d", r.Status, len(r.Body), maxBytes)
	}
	dom := string(runChromium(t, bin, s.base+"/dashboard", "--dump-dom"))
	if n := strings.Count(dom, `<svg class="usage-bar"`); n != 50 {
		t.Errorf("first page draws %d utilisation bars, want 50", n)
	}
	if !strings.Contains(dom, "keys 1–50 of 2000") || !strings.Contains(dom, "page=2") {
		t.Error("the first page does not say which keys it shows or has no link to the next page")
	}
	one := fmt.Sprintf("%s%04d", biz, 1234)
	dom = string(runChromium(t, bin, s.base+"/dashboard?bizType="+one, "--dump-dom"))
	if !strings.Contains(dom, `data-key="`+one+`:ALIPAY"`) || strings.Count(dom, `<svg class="usage-bar"`) != 1 {
		t.Errorf("the bizType filter does not show exactly %s:ALIPAY", one)
	}
}

// TestDashboardChartsReadInChromium lays the dashboard out in headless
// Chromium and measures what a person reads: a long multi-window rule in
// a chart header neither overlaps the key nor squeezes into a narrow
// column; every y-axis label stands at the height of the count it names,
// whole numbers evenly spaced; a route without fallbacks says 0; and a
// limit change on a key without traffic shows its badge. The page is saved
// to integration/testdata/out/dashboard-charts.png.
func TestDashboardChartsReadInChromium(t *testing.T) {
	biz := testutil.UniqueName("DREAD")
	doc := func(unionpay int) string {
		return fmt.Sprintf(`window: 1s
routes:
  %[1]s: [ALIPAY, WECHAT]
limits:
  %[1]s:ALIPAY:
    - {limit: 500, window: 1m}
    - {limit: 3000, window: 1h}
    - {amount: 500000000, calendar: day, zone: Asia/Shanghai, currency: CNY}
    - {limit: 300000, calendar: day, cutoff: "23:00", zone: Asia/Shanghai}
  %[1]s:WECHAT: {limit: 20, window: 1h}
  %[1]s:UNIONPAY: {limit: %[2]d, window: 1h}
`, biz, unionpay)
	}
	s := startServer(t, serverOptions{Limits: doc(10), Config: channelsConfig})
	for i := 0; i < 5; i++ {
		s.pay(t, payBody(fmt.Sprintf("%s-a-%d", biz, i), biz, "ALIPAY"))
	}
	s.pay(t, payBody(biz+"-w-1", biz, "WECHAT"))
	// UNIONPAY's limit changes; it has no traffic.
	mustWrite(t, s.env["PAYSERVER_LIMITS_FILE"], doc(12))
	waitFor(t, "the new UNIONPAY limit in force", 10*time.Second, func() bool {
		return strings.Contains(string(s.do(t, http.MethodGet, "/limits", nil, nil).Body), `"12/1h"`)
	})

	b := startBrowser(t, 1280, 900)
	b.navigate(s.base + "/dashboard?bizType=" + biz)
	shot := b.screenshot("dashboard-charts.png")
	t.Logf("screenshot: %s", shot)

	// Amounts are read in major units with their currency.
	if text := b.text(); !strings.Contains(text, "amount 5,000,000.00 CNY per day from 00:00 Asia/Shanghai") || strings.Contains(text, "500000000") {
		t.Errorf("the page does not show the CNY cap in major units (5,000,000.00 CNY), or shows 500000000:\n%s", text)
	}

	// Chart headers: the key and the totals do not overlap; a part that
	// takes more than one line starts at the chart's left edge, not squeezed
	// beside the key; and no window of a rule is broken across lines.
	var headers []struct {
		Key                    string
		KeyBox, TotalBox       [4]float64 // left, top, right, bottom
		TotalLines, LineHeight float64
		BrokenWindows          []string
	}
	b.eval(`[...document.querySelectorAll('.chart')].map(c => {
		const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
		const totals = c.querySelector('.totals');
		const lh = parseFloat(getComputedStyle(totals).lineHeight);
		return {Key: c.querySelector('svg').dataset.key, KeyBox: box(c.querySelector('h3 .key')), TotalBox: box(totals),
			TotalLines: Math.round(totals.getBoundingClientRect().height / lh), LineHeight: lh,
			BrokenWindows: [...c.querySelectorAll('.rule .window')].filter(w => w.getClientRects().length > 1).map(w => w.textContent)};
	})`, &headers)
	if len(headers) != 3 {
		t.Fatalf("%d charts, want 3", len(headers))
	}
	for _, h := range headers {
		k, tot := h.KeyBox, h.TotalBox
		if k[0] < tot[2] && tot[0] < k[2] && k[1] < tot[3] && tot[1] < k[3] {
			t.Errorf("%s: header key %v and totals %v overlap", h.Key, k, tot)
		}
		if h.TotalLines > 1 && tot[0] > k[0]+1 {
			t.Errorf("%s: the totals take %v lines squeezed beside the key (from x=%.0f, the key at x=%.0f)", h.Key, h.TotalLines, tot[0], k[0])
		}
		if len(h.BrokenWindows) > 0 {
			t.Errorf("%s: rule windows broken across lines: %q", h.Key, h.BrokenWindows)
		}
	}

	// Y axes: labels are whole numbers, evenly spaced, each at the height
	// a bar of that count reaches.
	var axes []struct {
		Key    string
		Labels []struct {
			Text string
			Y    float64
		}
		Bars []struct{ Count, Top, Bottom float64 }
	}
	b.eval(`[...document.querySelectorAll('svg.history-chart')].map(svg => ({
		Key: svg.dataset.key,
		Labels: [...svg.querySelectorAll('text[text-anchor="end"][dx="-6"]')].map(t => ({Text: t.textContent, Y: t.getBBox().y + t.getBBox().height / 2})),
		Bars: [...svg.querySelectorAll('g')].filter(g => g.querySelector('rect')).map(g => ({
			Count: g.querySelector('title').textContent.match(/\d+(?= admitted| limited)/g).reduce((a, n) => a + +n, 0),
			Top: Math.min(...[...g.querySelectorAll('rect')].map(r => r.y.baseVal.value)),
			Bottom: Math.max(...[...g.querySelectorAll('rect')].map(r => r.y.baseVal.value + r.height.baseVal.value))})),
	}))`, &axes)
	for _, a := range axes {
		checkYAxis(t, a.Key, a.Labels, a.Bars)
	}

	// The route's fallbacks per minute: 0, not a blank cell.
	var fallbacks string
	b.eval(`document.querySelector('tr[data-biz="`+biz+`"] td:last-child').innerText.trim()`, &fallbacks)
	if fallbacks != "0" {
		t.Errorf("fallbacks per minute of a route without fallbacks reads %q, want 0", fallbacks)
	}

	// The limit change of a key without traffic has its badge.
	var badge string
	b.eval(`(document.querySelector('.chart:has(svg[data-key="`+biz+`:UNIONPAY"]) .badge.warn') || {innerText: ''}).innerText`, &badge)
	if badge != "limit changed" {
		t.Errorf("UNIONPAY's chart (no traffic, limit changed 10/1h -> 12/1h) has badge %q, want \"limit changed\"", badge)
	}
}

// checkYAxis checks that a chart's y labels are whole numbers, evenly
// spaced from 0, and each at the height of the count it names, as drawn by
// the bars (a bar of count n spans n units from the zero line).
func checkYAxis(t *testing.T, key string, labels []struct {
	Text string
	Y    float64
}, bars []struct{ Count, Top, Bottom float64 }) {
	t.Helper()
	if len(labels) < 2 {
		t.Errorf("%s: %d y labels, want at least 0 and a top", key, len(labels))
		return
	}
	values := make([]float64, len(labels))
	for i, l := range labels {
		n, err := strconv.Atoi(l.Text)
		if err != nil {
			t.Errorf("%s: y label %q is not a whole number", key, l.Text)
			return
		}
		values[i] = float64(n)
	}
	// Labels are drawn top to bottom or bottom to top; sort by value.
	idx := make([]int, len(labels))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return values[idx[a]] < values[idx[b]] })
	if values[idx[0]] != 0 {
		t.Errorf("%s: the lowest y label is %v, want 0", key, values[idx[0]])
	}
	step := values[idx[1]] - values[idx[0]]
	zeroY := labels[idx[0]].Y
	perUnit := (zeroY - labels[idx[len(idx)-1]].Y) / values[idx[len(idx)-1]]
	for j := 1; j < len(idx); j++ {
		v, y := values[idx[j]], labels[idx[j]].Y
		if d := v - values[idx[j-1]]; d != step {
			t.Errorf("%s: y labels %v are not evenly spaced", key, values)
			break
		}
		if want := zeroY - v*perUnit; math.Abs(y-want) > 0.5 {
			t.Errorf("%s: y label %v stands at %.1f, the height of %.2f (labels %v)", key, v, y, (zeroY-y)/perUnit, values)
		}
	}
	for _, b := range bars {
		if b.Count <= 0 {
			continue
		}
		if got := (b.Bottom - b.Top) / perUnit; math.Abs(got-b.Count) > 0.1 && b.Bottom-b.Top > 1.5 {
			t.Errorf("%s: a bar of %v reaches %.2f on the y axis", key, b.Count, got)
		}
		if math.Abs(b.Bottom-zeroY) > 2 {
			t.Errorf("%s: a bar starts at %.1f, the zero label stands at %.1f", key, b.Bottom, zeroY)
		}
	}
}

// TestDashboardLoginInChromium: with PAYSERVER_ADMIN_TOKEN set, a person
// opening the dashboard in a browser gets a login form; a wrong token says
// so; the right one opens the dashboard with an HttpOnly, SameSite=Strict
// session cookie that is not the token, the token never in a URL; "log
// out" ends it. A filter typed in lower case shows the dashboard's own
// message, with a link to the upper-case filter that works. Screenshots:
// integration/testdata/out/dashboard-login.png and dashboard-filter.png.
func TestDashboardLoginInChromium(t *testing.T) {
	token := "adm-" + testutil.UniqueName("TOK") + "-secret"
	biz := testutil.UniqueName("DLOGIN")
	s := startServer(t, serverOptions{Limits: fmt.Sprintf("limits:\n  %s:ALIPAY: 5\n", biz), Config: channelsConfig,
		Env: map[string]string{"PAYSERVER_ADMIN_TOKEN": token}})
	b := startBrowser(t, 1280, 900)
	var path string
	location := func() string { b.eval("location.pathname + location.search", &path); return path }
	submitLogin := func(tok string) {
		t.Helper()
		b.drainEvents()
		b.eval(`document.querySelector('#token').value = `+jsString(tok)+`; document.querySelector('form.login button').click(); true`, nil)
		b.waitLoad()
	}

	b.navigate(s.base + "/dashboard")
	if txt := b.text(); !strings.Contains(txt, "Log in to the dashboard") {
		t.Fatalf("the browser sees no login form at /dashboard:\n%s", txt)
	}
	t.Logf("login form: %s", b.screenshot("dashboard-login.png"))

	submitLogin("not-the-token")
	if txt := b.text(); !strings.Contains(txt, "That is not the admin token.") {
		t.Errorf("a wrong token does not say so:\n%s", txt)
	}
	submitLogin(token)
	if p := location(); p != "/dashboard" || !strings.Contains(b.text(), "Limits in force") {
		t.Fatalf("after logging in the browser is at %s:\n%s", p, b.text())
	}
	var session *browserCookie
	for _, c := range b.cookies(s.base + "/dashboard") {
		if c.Name == "payserver_admin" {
			session = &c
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != "Strict" || session.Path != "/" ||
		strings.Contains(session.Value, token) || len(session.Value) < 40 {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite Strict, Path /, an opaque id that is not the token", session)
	}
	var jsCookies, history string
	b.eval("document.cookie", &jsCookies)
	b.eval("location.href + ' ' + document.referrer", &history)
	if strings.Contains(jsCookies, "payserver_admin") || strings.Contains(history, token) {
		t.Errorf("the page's script can read the session (%q) or the token is in a URL (%q)", jsCookies, history)
	}
	if strings.Contains(s.logs(), token) {
		t.Error("the server log holds the token")
	}

	// A lower-case filter: the dashboard's own message, then its link.
	b.navigate(s.base + "/dashboard?bizType=" + strings.ToLower(biz))
	txt := b.text()
	if !strings.Contains(txt, `bizType "`+strings.ToLower(biz)+`" must contain only A-Z, 0-9 and _`) ||
		!strings.Contains(txt, "show "+biz) || !strings.Contains(txt, "Limits in force") {
		t.Errorf("a lower-case bizType does not show the dashboard with its message:\n%.600s", txt)
	}
	var typed string
	b.eval(`document.querySelector('input[name=bizType]').value`, &typed)
	if typed != strings.ToLower(biz) {
		t.Errorf("the filter shows %q, want what was typed", typed)
	}
	t.Logf("bad filter: %s", b.screenshot("dashboard-filter.png"))
	b.drainEvents()
	b.eval(`document.querySelector('.filter-problem a').click(); true`, nil)
	b.waitLoad()
	if p := location(); !strings.Contains(p, "bizType="+biz) || !strings.Contains(b.text(), "keys 1–1 of 1") {
		t.Errorf("the upper-case link leads to %s:\n%.400s", p, b.text())
	}

	b.drainEvents()
	b.eval(`document.querySelector('form.logout button').click(); true`, nil)
	b.waitLoad()
	if p := location(); p != "/dashboard/login" || !strings.Contains(b.text(), "Log in to the dashboard") {
		t.Errorf("after logging out the browser is at %s", p)
	}
	for _, c := range b.cookies(s.base + "/dashboard") {
		if c.Name == "payserver_admin" {
			t.Errorf("the session cookie is still there after logout: %+v", c)
		}
	}
	b.navigate(s.base + "/dashboard")
	if !strings.Contains(b.text(), "Log in to the dashboard") {
		t.Error("after logout the dashboard opens without a login")
	}

	// Asked with a filter, logged out: the login returns to that URL.
	asked := "/dashboard?bizType=" + biz + "&pageSize=5"
	b.navigate(s.base + asked)
	submitLogin(token)
	if p := location(); p != asked || !strings.Contains(b.text(), "keys 1–1 of 1") {
		t.Errorf("after logging in from %s the browser is at %s", asked, p)
	}
	// The server's address opens the dashboard.
	b.navigate(s.base + "/")
	if p := location(); p != "/dashboard" {
		t.Errorf("opening %s/ the browser is at %s, want /dashboard", s.base, p)
	}
}
