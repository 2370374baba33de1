package httpapi_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"payserver/api"
	"payserver/internal/configcenter"
	"payserver/internal/console/consoletest"
	"payserver/internal/httpapi"
	"payserver/internal/limits"
)

// TestLimitsRouteShowsQuotas: GET /limits shows calendar, amount, currency,
// cutoff, zone and reserve of each window, the rule in force now (an active
// schedule's), the next schedule boundary, every schedule with its state,
// channel-wide keys and keys only schedules name, and the use of each
// window; a key whose use cannot be read says why.
func TestLimitsRouteShowsQuotas(t *testing.T) {
	parsed, err := limits.Parse([]byte(`zone: Asia/Shanghai
limits:
  ONLINE_PAY:ALIPAY:
    - {limit: 100, window: 1s}
    - {amount: 500000000, calendar: day, currency: CNY}
    - {limit: 300000, calendar: day, cutoff: "23:00"}
  "*:UNIONPAY":
    - {limit: 200, window: 1s, reserve: {REFUND: 40}}
  DOWN:ALIPAY: 5
schedules:
  - {key: "*:UNIONPAY", from: "2026-12-01T02:00:00+08:00", to: "2026-12-01T04:00:00+08:00", limits: 0}
  - {key: "ONLINE_PAY:ALIPAY", from: "2026-11-11T00:00:00+08:00", to: "2026-11-12T00:00:00+08:00", limits: [{limit: 300, window: 1s}]}
  - {key: "ONLINE_PAY:ALIPAY", from: "2025-11-11T00:00:00+08:00", to: "2025-11-12T00:00:00+08:00", limits: -1}
  - {key: "REFUND:WECHAT", from: "2026-12-24T00:00:00Z", to: "2026-12-26T00:00:00Z", limits: 10}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	at := time.Date(2026, 11, 11, 12, 0, 0, 0, time.UTC) // within the 11.11 schedule
	lv := consoletest.LimitsView{Cfg: cfg, St: configcenter.Status{Loaded: true, Source: "file"}, Now: at}
	h, err := httpapi.New(httpapi.Options{Pay: consoletest.NopPay{}, Logger: slog.New(slog.DiscardHandler), AdminToken: "t", Limits: lv,
		Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/limits", nil)
	req.Header.Set("Authorization", "Bearer t")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	v, err := api.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.CheckResponse(req, resp.StatusCode, resp.Header, raw); err != nil {
		t.Fatalf("GET /limits does not match the spec: %v\n%s", err, raw)
	}
	var body struct {
		Zone      string
		Schedules []struct{ Key, From, To, State, Rule string }
		Limits    []struct {
			Key         string
			ChannelWide bool
			InDocument  bool
			Closed      bool
			Rule        string
			Schedule    *struct{ From, To string }
			NextChange  *string
			UsageError  string
			Windows     []map[string]any
		}
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	if body.Zone != "Asia/Shanghai" {
		t.Errorf("zone = %q", body.Zone)
	}
	var states []string
	for _, s := range body.Schedules {
		states = append(states, s.Key+" "+s.From+" "+s.State)
	}
	wantStates := []string{
		"*:UNIONPAY 2026-12-01T02:00:00+08:00 upcoming",
		"ONLINE_PAY:ALIPAY 2025-11-11T00:00:00+08:00 past",
		"ONLINE_PAY:ALIPAY 2026-11-11T00:00:00+08:00 active",
		"REFUND:WECHAT 2026-12-24T00:00:00Z upcoming",
	}
	if !reflect.DeepEqual(states, wantStates) {
		t.Errorf("schedules = %q, want %q", states, wantStates)
	}
	byKey := map[string]int{}
	for i, l := range body.Limits {
		byKey[l.Key] = i
	}
	var keys []string
	for _, l := range body.Limits {
		keys = append(keys, l.Key)
	}
	if want := []string{"*:UNIONPAY", "DOWN:ALIPAY", "ONLINE_PAY:ALIPAY", "REFUND:WECHAT"}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys = %v, want %v", keys, want)
	}
	alipay := body.Limits[byKey["ONLINE_PAY:ALIPAY"]]
	if alipay.Rule != "300/1s" || alipay.Schedule == nil || alipay.Schedule.To != "2026-11-12T00:00:00+08:00" {
		t.Errorf("ONLINE_PAY:ALIPAY = rule %q schedule %+v, want the 11.11 schedule's 300/1s", alipay.Rule, alipay.Schedule)
	}
	if alipay.NextChange == nil || *alipay.NextChange != "2026-11-12T00:00:00+08:00" {
		t.Errorf("nextChange = %v, want the schedule's end", alipay.NextChange)
	}
	if len(alipay.Windows) != 1 || alipay.Windows[0]["used"] != float64(225) {
		t.Errorf("ALIPAY windows = %v, want one window using 225 (3/4 of 300)", alipay.Windows)
	}
	union := body.Limits[byKey["*:UNIONPAY"]]
	if !union.ChannelWide || union.Schedule != nil || union.Closed {
		t.Errorf("*:UNIONPAY = %+v, want channel-wide, its own rule", union)
	}
	if got := union.Windows[0]; !reflect.DeepEqual(got["reserve"], map[string]any{"REFUND": float64(40)}) || got["used"] != float64(150) {
		t.Errorf("*:UNIONPAY window = %v, want reserve REFUND 40 and used 150", got)
	}
	wechat := body.Limits[byKey["REFUND:WECHAT"]]
	if wechat.InDocument || wechat.Rule != "unlimited" || wechat.NextChange == nil {
		t.Errorf("REFUND:WECHAT = %+v, want a key only a schedule names, unlimited now, changing later", wechat)
	}
	if down := body.Limits[byKey["DOWN:ALIPAY"]]; down.UsageError == "" || down.Windows[0]["used"] != nil {
		t.Errorf("DOWN:ALIPAY = %+v, want a usage error and used null", down)
	}

	// Outside the schedule: the base rule, with its calendar windows.
	lv.Now = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	got := httpapiLimitsAt(t, lv, lv.Now)
	wantWindows := []map[string]any{
		{"rule": "count/1s", "kind": "count", "limit": float64(100), "window": "1s", "windowMs": float64(1000), "used": float64(75)},
		{"rule": "count/day", "kind": "count", "limit": float64(300000), "calendar": "day", "cutoff": "23:00", "zone": "Asia/Shanghai", "used": float64(225000)},
		{"rule": "amount/day", "kind": "amount", "limit": float64(500000000), "calendar": "day", "cutoff": "00:00", "zone": "Asia/Shanghai", "currency": "CNY", "used": float64(375000000),
			"limitMajor": "5000000.00", "usedMajor": "3750000.00"},
	}
	if !reflect.DeepEqual(got, wantWindows) {
		t.Errorf("ONLINE_PAY:ALIPAY windows =\n%v\nwant\n%v", got, wantWindows)
	}
}

// httpapiLimitsAt returns the windows GET /limits shows for
// ONLINE_PAY:ALIPAY at now.
func httpapiLimitsAt(t *testing.T, lv consoletest.LimitsView, now time.Time) []map[string]any {
	t.Helper()
	h, err := httpapi.New(httpapi.Options{Pay: consoletest.NopPay{}, Logger: slog.New(slog.DiscardHandler), Limits: lv, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/limits", nil)
	req.RemoteAddr = "127.0.0.1:5000"
	h.ServeHTTP(rec, req)
	var body struct {
		Limits []struct {
			Key     string
			Windows []map[string]any
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%v: %s", err, rec.Body.String())
	}
	for _, l := range body.Limits {
		if l.Key == "ONLINE_PAY:ALIPAY" {
			return l.Windows
		}
	}
	t.Fatalf("no ONLINE_PAY:ALIPAY in %s", rec.Body.String())
	return nil
}
