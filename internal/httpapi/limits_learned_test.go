package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/configcenter"
	"payserver/internal/console"
	"payserver/internal/console/consoletest"
	"payserver/internal/httpapi"
	"payserver/internal/limits"
	"payserver/internal/ratelimit"
)

// learnedDoc has one key that learns (its 1s window; the day window never
// does), one that does not hold a learned limit, and a channel-wide key.
const learnedDoc = `limits:
  ONLINE_PAY:ALIPAY:
    - {limit: 100, window: 1s}
    - {limit: 300000, calendar: day}
  REFUND:ALIPAY: {limit: 5, window: 1s}
  "*:UNIONPAY": {limit: 50, window: 1s}
`

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var throttledAt = time.Date(2026, 3, 1, 10, 3, 17, 0, time.UTC)

// throttledLimiter returns a Limiter on an in-process store under
// learnedDoc whose ONLINE_PAY:ALIPAY learned 70 of 100 at throttledAt: 100
// admitted, a throttle with a retry-after of 3s, every slot released.
func throttledLimiter(t *testing.T) (*ratelimit.Limiter, *ratelimit.Config, *fakeClock) {
	t.Helper()
	l, parsed, clock := localLimiter(t, learnedDoc)
	k := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	ctx := context.Background()
	var holds []ratelimit.Hold
	for i := 0; i < 100; i++ {
		d, err := l.Allow(ctx, k, fmt.Sprintf("m%d", i))
		if err != nil || !d.Allowed {
			t.Fatalf("admission %d: %+v, %v", i, d, err)
		}
		holds = append(holds, d.Hold)
	}
	if err := l.Throttled(ctx, holds[99], 3*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, h := range holds {
		if err := l.Release(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	return l, parsed.Config, clock
}

// localLimiter returns a Limiter on an in-process store, at throttledAt on
// a settable clock, under the limits document doc.
func localLimiter(t *testing.T, doc string) (*ratelimit.Limiter, *limits.Document, *fakeClock) {
	t.Helper()
	parsed, err := limits.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: throttledAt}
	l, err := ratelimit.New(ratelimit.NewLocalStore(clock.Now), ratelimit.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(parsed.Config)
	return l, parsed, clock
}

// limitsServer serves GET /limits on cfg, with learned limits from src.
func limitsServer(t *testing.T, cfg *ratelimit.Config, src httpapi.LearnedSource, clock *fakeClock) *consoletest.Server {
	t.Helper()
	gin.SetMode(gin.TestMode)
	lv := consoletest.LimitsView{Cfg: cfg, St: configcenter.Status{Loaded: true, Source: "file"}, Now: clock.Now()}
	h, err := httpapi.New(httpapi.Options{Pay: consoletest.NopPay{}, Logger: slog.New(slog.DiscardHandler), AdminToken: "tok",
		Limits: lv, Learned: src, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return consoletest.ServeHandler(t, h)
}

// limitWindows returns key's windows as GET /limits shows them, and its
// learnedError.
func limitWindows(t *testing.T, s *consoletest.Server, key string) ([]map[string]any, string) {
	t.Helper()
	a := s.Get(t, "/limits", "tok")
	if a.Status != 200 {
		t.Fatalf("GET /limits: %d %s", a.Status, a.Body)
	}
	var body struct {
		Limits []struct {
			Key          string
			LearnedError *string
			Windows      []map[string]any
		}
	}
	if err := json.Unmarshal([]byte(a.Body), &body); err != nil {
		t.Fatal(err)
	}
	for _, l := range body.Limits {
		if l.Key == key {
			e := ""
			if l.LearnedError != nil {
				e = *l.LearnedError
			}
			return l.Windows, e
		}
	}
	t.Fatalf("no %s in %s", key, a.Body)
	return nil, ""
}

// TestLimitsShowLearned: GET /limits shows a window's learned limit, what
// it enforces now (0 while the channel's retry-after holds it) and since
// and until when; the limit climbs back by 5% of 100 per window; windows
// that do not learn show none.
func TestLimitsShowLearned(t *testing.T) {
	l, cfg, clock := throttledLimiter(t)
	s := limitsServer(t, cfg, l, clock)
	learnedKeys := []string{"learned", "effectiveLimit", "learnedSince", "notBefore", "learnedUntil"}
	pick := func(w map[string]any) map[string]any {
		out := map[string]any{}
		for _, k := range learnedKeys {
			if v, ok := w[k]; ok {
				out[k] = v
			}
		}
		return out
	}

	ws, lerr := limitWindows(t, s, "ONLINE_PAY:ALIPAY")
	want := map[string]any{"learned": float64(70), "effectiveLimit": float64(0), "learnedSince": "2026-03-01T10:03:17Z",
		"notBefore": "2026-03-01T10:03:20Z", "learnedUntil": "2026-03-01T10:03:23Z"}
	if got := pick(ws[0]); fmt.Sprint(got) != fmt.Sprint(want) || lerr != "" {
		t.Errorf("1s window during the retry-after = %v (learnedError %q), want %v", got, lerr, want)
	}
	if got := pick(ws[1]); len(got) != 0 {
		t.Errorf("day window = %v, want no learned limit (calendar windows never learn)", got)
	}

	clock.Add(3 * time.Second) // past the retry-after, three windows later
	ws, _ = limitWindows(t, s, "ONLINE_PAY:ALIPAY")
	want = map[string]any{"learned": float64(85), "effectiveLimit": float64(85), "learnedSince": "2026-03-01T10:03:17Z",
		"learnedUntil": "2026-03-01T10:03:23Z"}
	if got := pick(ws[0]); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("1s window 3s later = %v, want %v", got, want)
	}
	if ws, lerr := limitWindows(t, s, "REFUND:ALIPAY"); len(pick(ws[0])) != 0 || lerr != "" {
		t.Errorf("REFUND:ALIPAY = %v %q, want no learned limit", ws, lerr)
	}
}

// failingLearned cannot read the store.
type failingLearned struct{}

func (failingLearned) Learned(context.Context, ratelimit.Key) ([]ratelimit.LearnedLimit, error) {
	return nil, errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
}

func (f failingLearned) LearnedOf(ctx context.Context, keys []ratelimit.Key) []ratelimit.KeyLearned {
	out := make([]ratelimit.KeyLearned, len(keys))
	for i, k := range keys {
		out[i].Limits, out[i].Err = f.Learned(ctx, k)
	}
	return out
}

// TestLimitsLearnedError: a store that cannot say the learned limits marks
// each key that learns with learnedError; the page is still answered.
func TestLimitsLearnedError(t *testing.T) {
	parsed, err := limits.Parse([]byte(learnedDoc))
	if err != nil {
		t.Fatal(err)
	}
	s := limitsServer(t, parsed.Config, failingLearned{}, &fakeClock{t: throttledAt})
	ws, lerr := limitWindows(t, s, "ONLINE_PAY:ALIPAY")
	if !strings.Contains(lerr, "connection refused") || ws[0]["learned"] != nil || ws[0]["used"] == nil {
		t.Errorf("windows %v, learnedError %q; want the use, no learned limit, and why", ws, lerr)
	}
}

// TestDashboardMarksLearned: the dashboard's limits table marks a window
// whose limit is learned, as GET /limits shows it.
func TestDashboardMarksLearned(t *testing.T) {
	l, cfg, clock := throttledLimiter(t)
	lv := consoletest.LimitsView{Cfg: cfg, St: configcenter.Status{Loaded: true, Source: "file"}}
	routes, err := console.New(console.Options{Reports: &consoletest.Reports{}, Usage: consoletest.Usage{Cfg: cfg}, Limits: lv,
		Logger: slog.New(slog.DiscardHandler), Now: clock.Now, Learned: l})
	if err != nil {
		t.Fatal(err)
	}
	s := consoletest.ServeAdmin(t, "", routes)
	page := s.Get(t, "/dashboard?channel=ALIPAY", "").Body
	if want := "learned 70 of 100 since 10:03:17 UTC, nothing before 10:03:20 UTC"; !strings.Contains(page, want) {
		t.Errorf("the dashboard lacks %q", want)
	}
	if n := strings.Count(page, `class="badge warn learned"`); n != 1 {
		t.Errorf("%d windows marked learned, want 1", n)
	}
}

// memHistory keeps the entries in memory and pages them (GET
// /limits/history); fail makes Record fail.
type memHistory struct {
	mu      sync.Mutex
	entries []configcenter.Change
	fail    bool
}

func (h *memHistory) Record(_ context.Context, c configcenter.Change) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail {
		return errors.New("Error 2013: Lost connection to MySQL server during query")
	}
	c.ID = uint64(len(h.entries) + 1)
	h.entries = append(h.entries, c)
	return nil
}

func (h *memHistory) Page(ctx context.Context, before uint64, limit int) ([]configcenter.Change, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fakeHistory(h.entries).Page(ctx, before, limit)
}

// TestLearnedReset: POST /limits/learned/reset forgets a key's learned
// limits and writes what it ended to the audit history, which GET
// /limits/history shows; a bad key is a 400 naming it, an unknown key a
// 404, no token a 401, and every error body is JSON.
func TestLearnedReset(t *testing.T) {
	l, _, clock := throttledLimiter(t)
	hist := &memHistory{}
	reset, err := httpapi.LearnedResetRoutes(httpapi.LearnedResetOptions{Limits: l, History: hist,
		Logger: slog.New(slog.DiscardHandler), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	history, err := httpapi.LimitsHistoryRoutes(hist, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s := consoletest.ServeAdmin(t, "tok", reset, history)
	key := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}

	if a := s.Post(t, "/limits/learned/reset", "", `{"key": "ONLINE_PAY:ALIPAY"}`); a.Status != 401 {
		t.Errorf("without the token: %d %s, want 401", a.Status, a.Body)
	}
	for _, bad := range []struct{ body, field string }{
		{`{"key": "online_pay:ALIPAY"}`, "key"}, {`{"key": "ONLINE_PAY"}`, "key"}, {`{"key": 7}`, "key"}, {`{}`, "key"},
		{`{"key": "ONLINE_PAY:ALIPAY", "window": "1s"}`, "body"}, {`not json`, "body"}, {`{"key": "A:B"} {}`, "body"},
	} {
		a := s.Post(t, "/limits/learned/reset", "tok", bad.body)
		if a.Status != 400 || !strings.Contains(a.Body, `"field":"`+bad.field+`"`) {
			t.Errorf("%s: %d %s, want 400 naming %s", bad.body, a.Status, a.Body, bad.field)
		}
	}
	if a := s.Post(t, "/limits/learned/reset", "tok", `{"key": "*:WECHAT"}`); a.Status != 404 || !strings.Contains(a.Body, `"NOT_FOUND"`) {
		t.Errorf("a key the limits do not name: %d %s, want 404", a.Status, a.Body)
	}
	if len(hist.entries) != 0 {
		t.Fatalf("refused resets were recorded: %+v", hist.entries)
	}
	if got, _ := l.Learned(context.Background(), key); len(got) != 1 {
		t.Fatalf("learned before the reset = %+v, want one", got)
	}

	a := s.Post(t, "/limits/learned/reset", "tok", `{"key": "ONLINE_PAY:ALIPAY"}`)
	if a.Status != 200 || a.Body != `{"key":"ONLINE_PAY:ALIPAY","reset":true}` {
		t.Fatalf("reset: %d %s", a.Status, a.Body)
	}
	if got, err := l.Learned(context.Background(), key); err != nil || len(got) != 0 {
		t.Errorf("learned after the reset = %+v, %v; want none", got, err)
	}
	if d, _ := l.Allow(context.Background(), key, "after-reset"); !d.Allowed {
		t.Errorf("the window still refuses after the reset (retry-after not forgotten): %+v", d)
	}
	if a := s.Post(t, "/limits/learned/reset", "tok", `{"key": "*:UNIONPAY"}`); a.Status != 200 {
		t.Errorf("channel-wide key: %d %s", a.Status, a.Body)
	}

	h := s.Get(t, "/limits/history", "tok")
	var page struct {
		Entries []struct {
			Kind, Source, Name, Version string
			Diff                        []string
		}
	}
	if err := json.Unmarshal([]byte(h.Body), &page); err != nil || h.Status != 200 {
		t.Fatalf("history: %d %s", h.Status, h.Body)
	}
	want := []string{
		"learned_reset admin *:UNIONPAY [*:UNIONPAY: no learned limit in force -> reset]",
		"learned_reset admin ONLINE_PAY:ALIPAY [ONLINE_PAY:ALIPAY count/1s: learned 70 of 100 since 2026-03-01T10:03:17Z -> reset]",
	}
	var got []string
	for _, e := range page.Entries {
		got = append(got, fmt.Sprintf("%s %s %s %v", e.Kind, e.Source, e.Name, e.Diff))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("history =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	hist.fail = true
	if a := s.Post(t, "/limits/learned/reset", "tok", `{"key": "ONLINE_PAY:ALIPAY"}`); a.Status != 503 || !strings.Contains(a.Body, "ask again") {
		t.Errorf("history down: %d %s, want 503 saying to ask again", a.Status, a.Body)
	}
}

// TestLimitsShowReservationsInForce: a channel-wide window of 100 keeping
// 40 for R and 40 for P, whose learned limit fell to 35, shows each
// reservation shrunk to ⌊40 × 35 / 80⌋ = 17 in reserveInForce and on the
// dashboard's text; the document's reserve stays as written.
func TestLimitsShowReservationsInForce(t *testing.T) {
	l, parsed, clock := localLimiter(t, "limits:\n  \"*:B\": [{limit: 100, window: 1m, reserve: {R: 40, P: 40}}]\n")
	ctx := context.Background()
	var holds []ratelimit.Hold
	for i := 0; i < 50; i++ {
		biz := "X" // 20 of X, then 30 of R: what X may use, then R's
		if i >= 20 {
			biz = "R"
		}
		d, err := l.Allow(ctx, ratelimit.Key{BizType: biz, Channel: "B"}, fmt.Sprintf("m%d", i))
		if err != nil || !d.Allowed {
			t.Fatalf("admission %d: %+v, %v", i, d, err)
		}
		holds = append(holds, d.Hold)
	}
	if err := l.Throttled(ctx, holds[0], 0); err != nil {
		t.Fatal(err)
	}
	s := limitsServer(t, parsed.Config, l, clock)
	ws, _ := limitWindows(t, s, "*:B")
	if got := fmt.Sprint(ws[0]["effectiveLimit"], ws[0]["reserveInForce"], ws[0]["reserve"]); got != "35 map[P:17 R:17] map[P:40 R:40]" {
		t.Errorf("effectiveLimit, reserveInForce, reserve = %s, want 35 map[P:17 R:17] map[P:40 R:40]", got)
	}
	lv := consoletest.LimitsView{Cfg: parsed.Config, St: configcenter.Status{Loaded: true, Source: "file"}}
	routes, err := console.New(console.Options{Reports: &consoletest.Reports{}, Usage: consoletest.Usage{Cfg: parsed.Config}, Limits: lv,
		Logger: slog.New(slog.DiscardHandler), Now: clock.Now, Learned: l})
	if err != nil {
		t.Fatal(err)
	}
	page := consoletest.ServeAdmin(t, "", routes).Get(t, "/dashboard?channel=B", "").Body
	if want := "kept now for P: 17, R: 17"; !strings.Contains(page, want) {
		t.Errorf("the dashboard lacks %q", want)
	}
}
