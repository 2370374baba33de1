package emulator

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"payserver/internal/channel/gateway"
)

// payserverStub stands in for payserver's notify endpoint: it checks each
// notification's signature and keeps the good ones.
type payserverStub struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	got      []notification
	failNext int // answer 503 to that many calls first
	calls    int
	callAt   []time.Time
}

type notification struct {
	path   string
	answer gateway.Answer
	at     time.Time
}

func newPayserverStub(t *testing.T) *payserverStub {
	s := &payserverStub{t: t}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calls++
		s.callAt = append(s.callAt, time.Now())
		if _, err := gateway.Verify(r.Header, gateway.Keys{testKey}, gateway.Message{Method: r.Method, Path: r.URL.Path, Body: body}, time.Now()); err != nil {
			t.Errorf("notification with a bad signature: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if s.failNext > 0 {
			s.failNext--
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var a gateway.Answer
		if err := json.Unmarshal(body, &a); err != nil {
			t.Errorf("notification %s: %v", body, err)
		}
		s.got = append(s.got, notification{path: r.URL.Path, answer: a, at: time.Now()})
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// wait returns the notifications once there are n, or fails.
func (s *payserverStub) wait(n int) []notification {
	s.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		got := slices.Clone(s.got)
		s.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%d notifications, want %d", len(got), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitDelivered returns n's stats once it counts want delivered (the
// stub keeps a copy before the notifier reads its answer), or after 5 s.
func waitDelivered(n *Notifier, want int64) NotifierStats {
	deadline := time.Now().Add(5 * time.Second)
	for n.Stats().Delivered < want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return n.Stats()
}

func (s *payserverStub) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

func TestNotificationsSignedWithDuplicates(t *testing.T) {
	stub := newPayserverStub(t)
	h := newHarness(t, harnessOptions{notifyURL: stub.srv.URL + "/"})
	h.mustAdmin("ALIPAY", `{"notify":true,"notifyDuplicates":2}`)
	p := h.pay("ALIPAY", "o-1", 10)
	got := stub.wait(3)
	for _, n := range got {
		if n.path != "/channels/ALIPAY/notify" || n.answer != p.answer {
			t.Errorf("notification %+v, want %+v at /channels/ALIPAY/notify", n, p.answer)
		}
	}
	// A replay is not notified again; a decline and a lost answer are.
	h.pay("ALIPAY", "o-1", 10)
	h.mustAdmin("ALIPAY", `{"notifyDuplicates":0,"declineRate":1}`)
	h.pay("ALIPAY", "o-2", 10)
	h.mustAdmin("ALIPAY", `{"declineRate":0,"lostAnswerRate":1,"holdMs":0}`)
	h.pay("ALIPAY", "o-3", 10)
	got = stub.wait(5)
	time.Sleep(100 * time.Millisecond)
	if n := stub.count(); n != 5 {
		t.Fatalf("%d notifications, want 5", n)
	}
	if a := got[3].answer; a.OrderNo != "o-2" || a.Outcome != gateway.Declined || a.Code != "INSUFFICIENT_FUNDS" {
		t.Errorf("decline notification %+v", a)
	}
	if a := got[4].answer; a.OrderNo != "o-3" || a.Outcome != gateway.Succeeded || a.TradeNo != h.lastLine().TradeNo {
		t.Errorf("lost-answer notification %+v, want SUCCEEDED %s", a, h.lastLine().TradeNo)
	}
	if s := waitDelivered(h.em.Notifier(), 5); s.Delivered != 5 || s.Failed != 0 || s.Dropped != 0 {
		t.Errorf("stats %+v, want 5 delivered", s)
	}
}

func TestNotificationsOffByDefault(t *testing.T) {
	stub := newPayserverStub(t)
	h := newHarness(t, harnessOptions{notifyURL: stub.srv.URL})
	h.pay("ALIPAY", "o-1", 10)
	time.Sleep(150 * time.Millisecond)
	if n := stub.count(); n != 0 {
		t.Errorf("%d notifications with notify off", n)
	}
}

func TestNotificationDelayAndProcessing(t *testing.T) {
	stub := newPayserverStub(t)
	h := newHarness(t, harnessOptions{notifyURL: stub.srv.URL})
	h.mustAdmin("WECHAT", `{"notify":true,"notifyDelayMs":200}`)
	start := time.Now()
	h.pay("WECHAT", "o-1", 1)
	if got := stub.wait(1); got[0].at.Sub(start) < 200*time.Millisecond {
		t.Errorf("notified after %v, want after notifyDelayMs 200", got[0].at.Sub(start))
	}
	// A PROCESSING payment is notified once revealed (then the delay).
	h.mustAdmin("WECHAT", `{"notifyDelayMs":0,"processingRate":1,"processingMs":300}`)
	start = time.Now()
	h.pay("WECHAT", "o-2", 1)
	got := stub.wait(2)
	if got[1].at.Sub(start) < 300*time.Millisecond || got[1].answer.Outcome != gateway.Succeeded {
		t.Errorf("processing notification %+v after %v, want SUCCEEDED after 300 ms", got[1].answer, got[1].at.Sub(start))
	}
}

func TestNotificationRetried(t *testing.T) {
	stub := newPayserverStub(t)
	stub.failNext = 2
	h := newHarness(t, harnessOptions{notifyURL: stub.srv.URL})
	h.mustAdmin("ALIPAY", `{"notify":true,"notifyRetriesMs":[50,100,100]}`)
	h.pay("ALIPAY", "o-1", 1)
	stub.wait(1)
	if s := waitDelivered(h.em.Notifier(), 1); s.Delivered != 1 || s.Failed != 0 {
		t.Errorf("stats %+v, want delivered on the third try", s)
	}
	stub.mu.Lock()
	defer stub.mu.Unlock()
	if stub.calls != 3 {
		t.Errorf("%d attempts, want 3", stub.calls)
	}
}

// TestNotificationRetriesFollowTheSchedule: a copy payserver does not
// acknowledge is sent again after each wait of the channel's
// notifyRetriesMs, in order, and given up after the last.
func TestNotificationRetriesFollowTheSchedule(t *testing.T) {
	stub := newPayserverStub(t)
	stub.failNext = 10
	h := newHarness(t, harnessOptions{notifyURL: stub.srv.URL})
	h.mustAdmin("ALIPAY", `{"notify":true,"notifyRetriesMs":[400,50]}`)
	h.pay("ALIPAY", "o-1", 1)
	deadline := time.Now().Add(5 * time.Second)
	for h.em.Notifier().Stats().Failed < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // no further attempt comes
	stub.mu.Lock()
	defer stub.mu.Unlock()
	if len(stub.callAt) != 3 {
		t.Fatalf("%d attempts, want 3 (the first and two retries)", len(stub.callAt))
	}
	first, second := stub.callAt[1].Sub(stub.callAt[0]), stub.callAt[2].Sub(stub.callAt[1])
	if first < 400*time.Millisecond || second < 50*time.Millisecond || second > 300*time.Millisecond {
		t.Errorf("retries after %v and %v, want 400 ms then 50 ms", first, second)
	}
	if s := h.em.Notifier().Stats(); s.Failed != 1 || s.Delivered != 0 {
		t.Errorf("stats %+v, want the copy given up", s)
	}
}

// TestNotifyRetriesDefault: a channel retries on WeChat Pay's published
// schedule unless told otherwise.
func TestNotifyRetriesDefault(t *testing.T) {
	b := DefaultBehaviour()
	want := "[15s 15s 30s 3m0s 10m0s 20m0s 30m0s 30m0s 30m0s 1h0m0s 3h0m0s 3h0m0s 3h0m0s 6h0m0s 6h0m0s]"
	if got := fmt.Sprint(b.NotifyRetries); got != want {
		t.Errorf("default notifyRetries %s, want %s", got, want)
	}
}

func TestNotificationsReordered(t *testing.T) {
	stub := newPayserverStub(t)
	h := newHarness(t, harnessOptions{notifyURL: stub.srv.URL, seed: 42})
	h.mustAdmin("ALIPAY", `{"notify":true,"notifyReorder":true,"notifyDelayMs":100}`)
	var sent []string
	for i := range 20 {
		no := "o-" + string(rune('a'+i))
		h.pay("ALIPAY", no, 1)
		sent = append(sent, no)
	}
	var arrived []string
	for _, n := range stub.wait(20) {
		arrived = append(arrived, n.answer.OrderNo)
	}
	if slices.Equal(arrived, sent) {
		t.Errorf("notifications arrived in order %v, want them reordered", arrived)
	}
	slices.Sort(arrived)
	if !slices.Equal(arrived, sent) {
		t.Errorf("notifications %v, want each order once", arrived)
	}
}

func TestNotifierQueueBoundAndClose(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	n, err := NewNotifier(NotifierConfig{URL: srv.URL, Key: func(string) (gateway.Key, bool) { return testKey, true }, QueueLimit: 2}, newRoller(1))
	if err != nil {
		t.Fatal(err)
	}
	// One copy in flight to a server that never answers: Close cancels it.
	n.Send("ALIPAY", gateway.Answer{OrderNo: "o-2", Outcome: gateway.Succeeded}, NotifyOptions{Due: time.Now()})
	time.Sleep(100 * time.Millisecond)
	n.Send("ALIPAY", gateway.Answer{OrderNo: "o-1", Outcome: gateway.Succeeded}, NotifyOptions{Due: time.Now().Add(time.Hour), Duplicates: 5})
	if s := n.Stats(); s.Dropped != 4 {
		t.Errorf("stats %+v, want 4 copies dropped past the limit of 2", s)
	}
	closed := make(chan struct{})
	go func() { _ = n.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("Close waited for a hung payserver")
	}
	if s := n.Stats(); s.Delivered != 0 || s.Dropped != 4+2+1 {
		t.Errorf("stats after Close %+v, want the 2 queued copies and the one in flight dropped too", s)
	}
}
