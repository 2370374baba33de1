package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLearnedLimitsWired: a running payserver exports the learned-limit
// metrics of its learning windows and the throttles of each channel from
// the start (so that the alert's metrics exist), resets a key's learned
// limits on POST /limits/learned/reset, and shows the reset in GET
// /limits/history.
func TestLearnedLimitsWired(t *testing.T) {
	m := NewMain(embeddedConfig(t, t.TempDir()), slog.New(slog.DiscardHandler))
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	wantSeries := []string{
		`payserver_limit_configured{key="ONLINE_PAY:ALIPAY",window="count/1s"} 3`,
		`payserver_limit_learned_ratio{key="ONLINE_PAY:ALIPAY",window="count/1s"} 1`,
		`payserver_channel_throttles_total{channel="ALIPAY"} 0`,
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, metrics := call(http.MethodGet, "/metrics", "")
		var missing []string
		for _, s := range wantSeries {
			if !strings.Contains(metrics, s) {
				missing = append(missing, s)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %q", missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if status, body := call(http.MethodPost, "/limits/learned/reset", `{"key": "ONLINE_PAY:ALIPAY"}`); status != 200 {
		t.Fatalf("reset: %d %s", status, body)
	}
	if _, body := call(http.MethodGet, "/limits/history", ""); !strings.Contains(body, `"kind":"learned_reset"`) ||
		!strings.Contains(body, `ONLINE_PAY:ALIPAY: no learned limit in force`) {
		t.Errorf("history lacks the reset: %s", body)
	}
}
