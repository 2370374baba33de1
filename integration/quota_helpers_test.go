package integration

import (
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// quotaServer starts one payserver on real Redis and MariaDB whose
// simulator has one channel of its own (so channel-wide keys and calendar
// windows never share Redis keys with another test), with the limits
// document doc(channel). It returns the server and the channel.
func quotaServer(t *testing.T, channelConfig string, doc func(ch string) string) (*server, string) {
	t.Helper()
	ch := testutil.UniqueName("QCH")
	s := startServer(t, serverOptions{
		Limits: doc(ch),
		Config: fmt.Sprintf("channelTimeout: 300ms\nchannels:\n  %s: {%s}\n", ch, channelConfig),
	})
	return s, ch
}

// payAmount pays amount in currency on biz:ch with a fresh requestId (id,
// when given, instead).
func payAmount(t *testing.T, s *server, biz, ch string, amount int64, currency string, id ...string) reply {
	t.Helper()
	body := payBody(testutil.UniqueName("Q-"), biz, ch)
	if len(id) > 0 {
		body["requestId"] = id[0]
	}
	body["amount"], body["currency"] = amount, currency
	return s.pay(t, body)
}

// limitedDetails checks that r is a 429 REQUEST_LIMITED and returns its
// details.
func limitedDetails(t *testing.T, r reply) map[string]any {
	t.Helper()
	if r.Status != http.StatusTooManyRequests {
		t.Fatalf("status %d %s, want 429", r.Status, r.Body)
	}
	e := r.JSON(t)
	if e["code"] != "REQUEST_LIMITED" {
		t.Fatalf("code %v, want REQUEST_LIMITED", e["code"])
	}
	return e["details"].(map[string]any)
}

// wantDetail fails unless details[name] is want (numbers compare as
// float64; nil means absent).
func wantDetail(t *testing.T, details map[string]any, name string, want any) {
	t.Helper()
	got, ok := details[name]
	if want == nil {
		if ok {
			t.Errorf("details.%s = %v, want it absent (details %v)", name, got, details)
		}
		return
	}
	switch w := want.(type) {
	case int:
		want = float64(w)
	case int64:
		want = float64(w)
	}
	if got != want {
		t.Errorf("details.%s = %v, want %v (details %v)", name, got, want, details)
	}
}

// wantRetryNear fails unless details.retryAfterMs is within slack of
// until.
func wantRetryNear(t *testing.T, details map[string]any, until, slack time.Duration) {
	t.Helper()
	ms, ok := details["retryAfterMs"].(float64)
	if !ok {
		t.Fatalf("details.retryAfterMs missing: %v", details)
	}
	if d := math.Abs(ms - float64(until.Milliseconds())); d > float64(slack.Milliseconds()) {
		t.Errorf("retryAfterMs = %v, want %v ± %v", ms, until.Milliseconds(), slack.Milliseconds())
	}
}

// limitEntry returns GET /limits' entry of key, or nil.
func limitEntry(t *testing.T, s *server, key string) map[string]any {
	t.Helper()
	l := s.do(t, http.MethodGet, "/limits", nil, nil).JSON(t)
	for _, r := range l["limits"].([]any) {
		if e := r.(map[string]any); e["key"] == key {
			return e
		}
	}
	return nil
}

// nextStart returns when the day that starts at hh:mm in zone, after now,
// begins.
func nextStart(t *testing.T, zone string, hh, mm int, now time.Time) time.Time {
	t.Helper()
	z, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	l := now.In(z)
	next := time.Date(l.Year(), l.Month(), l.Day(), hh, mm, 0, 0, z)
	if !next.After(now) {
		next = time.Date(l.Year(), l.Month(), l.Day()+1, hh, mm, 0, 0, z)
	}
	return next
}
