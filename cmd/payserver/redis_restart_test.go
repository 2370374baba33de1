package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"payserver/internal/httpapi"
	"payserver/internal/testenv"
)

// TestLimitsShowWhatAnOutageHides: on a real Redis without persistence,
// GET /limits shows, for a day window, the admissions this instance
// decided in process while Redis was down (which Redis never holds), and
// once Redis has restarted (its run id changed), when it did: the Redis
// count may miss what was admitted before then.
func TestLimitsShowWhatAnOutageHides(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	cfg := embeddedConfig(t, t.TempDir())
	if err := os.WriteFile(cfg.LimitsFile, []byte("limits:\n  REFUND:ALIPAY: [{limit: 100, calendar: day}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.RedisAddrs = []string{r.Addr}
	cfg.API.ClientTokens = []httpapi.ClientToken{{Name: "refunds", Token: "tok-refunds-0123456789"}}
	m := NewMain(cfg, slog.New(slog.DiscardHandler))
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()
	acquire := func(id string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/limits/acquire",
			strings.NewReader(`{"bizType":"REFUND","channel":"ALIPAY","requestId":"`+id+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer tok-refunds-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	type window struct {
		Used             *int64  `json:"used"`
		InProcess        *int64  `json:"inProcess"`
		RedisRestartedAt *string `json:"redisRestartedAt"`
	}
	limits := func() (window, *string) {
		t.Helper()
		resp, err := http.Get(base + "/limits")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var body struct {
			RedisRestartedAt *string `json:"redisRestartedAt"`
			Limits           []struct {
				Windows []window `json:"windows"`
			} `json:"limits"`
		}
		if err := json.Unmarshal(b, &body); err != nil || len(body.Limits) != 1 || len(body.Limits[0].Windows) != 1 {
			t.Fatalf("GET /limits: %v\n%s", err, b)
		}
		return body.Limits[0].Windows[0], body.RedisRestartedAt
	}

	if code := acquire("r-1"); code != http.StatusOK {
		t.Fatalf("acquire r-1: %d", code)
	}
	w, restarted := limits()
	if w.Used == nil || *w.Used != 1 || w.InProcess == nil || *w.InProcess != 0 || w.RedisRestartedAt != nil || restarted != nil {
		t.Fatalf("before the outage: window %+v, restarted %v; want used 1, inProcess 0, no restart", w, restarted)
	}

	r.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for acquire("r-2") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("r-2 was never admitted in process while Redis was down")
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.Start()
	before := time.Now().Add(-time.Second)
	deadline = time.Now().Add(10 * time.Second)
	for {
		w, restarted = limits()
		if w.Used != nil && w.RedisRestartedAt != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart: window %+v; want its use read and the restart marked", w)
		}
		time.Sleep(100 * time.Millisecond)
	}
	at, err := time.Parse(time.RFC3339, *w.RedisRestartedAt)
	if err != nil || at.Before(before.Truncate(time.Second)) || restarted == nil {
		t.Fatalf("redisRestartedAt %q (%v), top-level %v; want the restart's time", *w.RedisRestartedAt, err, restarted)
	}
	if *w.Used != 0 || w.InProcess == nil || *w.InProcess != 1 {
		t.Fatalf("after the restart: used %d, inProcess %v; want 0 in the restarted Redis and r-2's 1 decided in process", *w.Used, w.InProcess)
	}
}
