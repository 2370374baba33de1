package integration

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"payserver/internal/channel/gateway"
)

// gatewayLimits gives each scenario a bizType of its own with one slot an
// hour on ALIPAY, so that whether the slot was kept or released shows in
// whether the next payment is admitted.
const gatewayLimits = `limits:
  LOST_%[1]s:ALIPAY: [{limit: 1, window: 1h}]
  DROP_%[1]s:ALIPAY: [{limit: 1, window: 1h}]
  REFUSE_%[1]s:ALIPAY: [{limit: 1, window: 1h}]
  DOWN_%[1]s:WECHAT: [{limit: 1, window: 1h}]
  PROC_%[1]s:ALIPAY: [{limit: 1, window: 1h}]
  NOTE_%[1]s:ALIPAY: [{limit: 10, window: 1h}]
  THR_%[1]s:ALIPAY: [{limit: 2, window: 1h}]
  ROUTED_%[1]s:ALIPAY: [{limit: 10, window: 1h}]
  ROUTED_%[1]s:UNIONPAY: [{limit: 10, window: 1h}]
routes:
  ROUTED_%[1]s: [ALIPAY, UNIONPAY]
adaptive:
  # This test is about the throttled payment's own slot; learning from
  # throttles has its own (adaptive_test.go).
  "THR_%[1]s:ALIPAY": off
`

// TestGatewayFailureClassesEndAsTheChannelSaw drives every failure class
// through the real emulator: each payment ends as the channel's books
// say, its slot kept when money may have moved and released when it
// provably did not, and at the end payserver's orders agree with the
// emulator's ledger.
func TestGatewayFailureClassesEndAsTheChannelSaw(t *testing.T) {
	addr := freePort(t)
	emu := startEmulator(t, "http://"+addr)
	closed := freePort(t) // nothing listens there: WECHAT's connections are refused
	tag := runTag()
	s := gatewayServer(t, addr, emu.base(), fmt.Sprintf(gatewayLimits, tag),
		"channels:\n  ALIPAY: {}\n  UNIONPAY: {}\n  WECHAT:\n    gateway: {url: \"http://"+closed+"\", secret: "+gatewaySecret+"}\n", nil)
	var ids []string
	pay := func(id, biz, ch string) map[string]any {
		t.Helper()
		id, biz = id+"-"+tag, biz+"_"+tag
		ids = append(ids, id)
		r := s.pay(t, payBody(id, biz, ch))
		if r.Status != 200 {
			t.Fatalf("%s: %d %s", id, r.Status, r.Body)
		}
		return r.JSON(t)
	}
	admitted := func(id, biz, ch string) bool {
		t.Helper()
		id, biz = id+"-"+tag, biz+"_"+tag
		r := s.pay(t, payBody(id, biz, ch))
		if r.Status == 200 {
			ids = append(ids, id)
		}
		return r.Status == 200
	}

	t.Run("processed, answer lost: UNKNOWN, resolved SUCCEEDED by query, slot kept", func(t *testing.T) {
		emu.set("ALIPAY", map[string]any{"lostAnswerRate": 1})
		if o := pay("lost-1", "LOST", "ALIPAY"); o["status"] != "UNKNOWN" {
			t.Fatalf("lost answer: %v, want UNKNOWN", o)
		}
		emu.calm("ALIPAY")
		o := waitResolved(t, s, "lost-1-"+tag, 15*time.Second)
		if o["status"] != "SUCCEEDED" || o["resolvedBy"] != "query" || o["resolvedAt"] == nil {
			t.Fatalf("resolved as %v", o)
		}
		if admitted("lost-2", "LOST", "ALIPAY") {
			t.Fatal("the slot of a payment that moved money was released")
		}
	})

	t.Run("never processed, no answer: UNKNOWN, NOT_FOUND, closed, NOT_SENT, slot released", func(t *testing.T) {
		emu.set("ALIPAY", map[string]any{"dropRate": 1})
		if o := pay("drop-1", "DROP", "ALIPAY"); o["status"] != "UNKNOWN" {
			t.Fatalf("dropped: %v, want UNKNOWN", o)
		}
		emu.calm("ALIPAY")
		o := waitResolved(t, s, "drop-1-"+tag, 15*time.Second)
		if o["status"] != "FAILED" || o["failureCode"] != "NOT_SENT" || o["resolvedBy"] != "close" {
			t.Fatalf("resolved as %v, want FAILED NOT_SENT by close", o)
		}
		if !admitted("drop-2", "DROP", "ALIPAY") {
			t.Fatal("the slot of a payment the channel never processed was kept")
		}
	})

	t.Run("connection closed before reading: never processed, ends NOT_SENT, slot released", func(t *testing.T) {
		emu.set("ALIPAY", map[string]any{"refuseRate": 1})
		pay("refuse-1", "REFUSE", "ALIPAY")
		emu.calm("ALIPAY")
		o := waitResolved(t, s, "refuse-1-"+tag, 15*time.Second)
		if o["status"] != "FAILED" || o["failureCode"] != "NOT_SENT" {
			t.Fatalf("refused: %v, want FAILED NOT_SENT", o)
		}
		if !admitted("refuse-2", "REFUSE", "ALIPAY") {
			t.Fatal("the slot of a refused payment was kept")
		}
	})

	t.Run("connection refused: NOT_SENT at once, slot released", func(t *testing.T) {
		o := pay("down-1", "DOWN", "WECHAT")
		if o["status"] != "FAILED" || o["failureCode"] != "NOT_SENT" || o["resolvedBy"] != nil {
			t.Fatalf("refused connection: %v, want FAILED NOT_SENT at once", o)
		}
		// The slot is free again: the next one is admitted, and refused by
		// the connection again.
		if !admitted("down-2", "DOWN", "WECHAT") {
			t.Fatal("the slot of a payment that never left was kept")
		}
	})

	t.Run("PROCESSING: UNKNOWN, resolved once the channel decides", func(t *testing.T) {
		emu.set("ALIPAY", map[string]any{"processingRate": 1, "processingMs": 1500})
		o := pay("proc-1", "PROC", "ALIPAY")
		if o["status"] != "UNKNOWN" || o["failureCode"] != "CHANNEL_PROCESSING" {
			t.Fatalf("processing: %v, want UNKNOWN CHANNEL_PROCESSING", o)
		}
		emu.calm("ALIPAY")
		if o = waitResolved(t, s, "proc-1-"+tag, 15*time.Second); o["status"] != "SUCCEEDED" || o["resolvedBy"] != "query" {
			t.Fatalf("resolved as %v", o)
		}
	})

	t.Run("THROTTLED: not charged, not sent, 429 channelThrottled, slot released; a routed payment moves on", func(t *testing.T) {
		emu.set("ALIPAY", map[string]any{"throttleCapacity": 1, "throttleWindowMs": 60000})
		if o := pay("thr-1", "THR", "ALIPAY"); o["status"] != "SUCCEEDED" {
			t.Fatalf("first: %v", o)
		}
		thr2 := "thr-2-" + tag
		ids = append(ids, thr2)
		r := s.pay(t, payBody(thr2, "THR_"+tag, "ALIPAY"))
		if d, _ := r.JSON(t)["details"].(map[string]any); r.Status != 429 || d["reason"] != "channelThrottled" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("throttled: %d %s, want 429 channelThrottled with a Retry-After", r.Status, r.Body)
		}
		if o := s.do(t, http.MethodGet, "/pay/"+thr2, nil, nil).JSON(t); o["status"] != "FAILED" || o["failureCode"] != "NOT_SENT" {
			t.Fatalf("throttled order: %v, want FAILED NOT_SENT", o)
		}
		if again := s.pay(t, payBody(thr2, "THR_"+tag, "ALIPAY")); again.Status != 429 || again.Header.Get("Retry-After") != "" {
			t.Fatalf("a retry of a throttled requestId: %d %v %s, want the same 429 without Retry-After", again.Status, again.Header, again.Body)
		}
		emu.set("ALIPAY", map[string]any{"throttleCapacity": 0})
		// Two slots an hour: thr-1's is kept, thr-2's was released.
		if o := pay("thr-3", "THR", "ALIPAY"); o["status"] != "SUCCEEDED" {
			t.Fatalf("after a throttled payment: %v, want its slot free again", o)
		}
		emu.set("ALIPAY", map[string]any{"throttleCapacity": 1, "throttleWindowMs": 60000})
		body := payBody("routed-1-"+tag, "ROUTED_"+tag, "")
		delete(body, "channel")
		ids = append(ids, "routed-1-"+tag)
		r = s.pay(t, body)
		o := r.JSON(t)
		if r.Status != 200 || o["status"] != "SUCCEEDED" || o["channel"] != "UNIONPAY" {
			t.Fatalf("routed past a throttling channel: %d %v", r.Status, o)
		}
		emu.calm("ALIPAY")
	})

	t.Run("notifications: duplicated and reordered, one resolution", func(t *testing.T) {
		emu.set("ALIPAY", map[string]any{"lostAnswerRate": 1, "notify": true, "notifyDuplicates": 2, "notifyReorder": true})
		var wg sync.WaitGroup
		answers := make([]reply, 3)
		for i := range 3 {
			id := fmt.Sprintf("note-%d-%s", i, tag)
			ids = append(ids, id)
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = s.pay(t, payBody(id, "NOTE_"+tag, "ALIPAY"))
			}()
		}
		wg.Wait()
		for i := range 3 {
			// The notification arrives while the owner waits for the lost
			// answer: it ends the order, and the owner answers with it.
			if a := answers[i].JSON(t); answers[i].Status != 200 || a["status"] != "SUCCEEDED" || a["resolvedBy"] != "notify" {
				t.Fatalf("POST /pay answered %d %v, want the notified SUCCEEDED", answers[i].Status, a)
			}
			o := waitResolved(t, s, fmt.Sprintf("note-%d-%s", i, tag), 15*time.Second)
			if o["status"] != "SUCCEEDED" || o["resolvedBy"] != "notify" {
				t.Fatalf("notified: %v", o)
			}
		}
		emu.calm("ALIPAY")
		// A notification after the order ended changes nothing.
		o := s.do(t, http.MethodGet, "/pay/note-0-"+tag, nil, nil).JSON(t)
		late := gateway.Answer{OrderNo: o["orderNo"].(string), Outcome: gateway.Declined, Code: "LATE"}
		if r := signedNotify(t, s, "ALIPAY", late, gatewaySecret); r.Status != 204 {
			t.Fatalf("late notification: %d %s", r.Status, r.Body)
		}
		if again := s.do(t, http.MethodGet, "/pay/note-0-"+tag, nil, nil).JSON(t); again["status"] != "SUCCEEDED" || again["resolvedAt"] != o["resolvedAt"] {
			t.Fatalf("a final order changed: %v -> %v", o, again)
		}
	})

	t.Run("a forged notification is refused and changes nothing", func(t *testing.T) {
		emu.set("ALIPAY", map[string]any{"lostAnswerRate": 1})
		o := pay("forged-1", "NOTE", "ALIPAY")
		emu.set("ALIPAY", map[string]any{"lostAnswerRate": 0, "pauseMs": 3000}) // nothing resolves it for 3s
		forged := gateway.Answer{OrderNo: o["orderNo"].(string), Outcome: gateway.Declined, Code: "FORGED"}
		if r := signedNotify(t, s, "ALIPAY", forged, "not-the-secret"); r.Status != 401 {
			t.Fatalf("forged notification: %d %s, want 401", r.Status, r.Body)
		}
		now := s.do(t, http.MethodGet, "/pay/forged-1-"+tag, nil, nil).JSON(t)
		if now["status"] == "FAILED" || now["failureCode"] == "FORGED" {
			t.Fatalf("a forged notification changed the order: %v", now)
		}
		emu.calm("ALIPAY")
		if o = waitResolved(t, s, "forged-1-"+tag, 15*time.Second); o["status"] != "SUCCEEDED" {
			t.Fatalf("resolved as %v", o)
		}
		if !strings.Contains(s.logs(), "a channel notification was refused") || strings.Contains(s.logs(), gatewaySecret) {
			t.Fatal("the refusal is not logged, or the log shows the secret")
		}
	})

	checkAgainstLedger(t, s, emu, ids)
	if page := s.do(t, http.MethodGet, "/dashboard", nil, nil); !strings.Contains(string(page.Body), "Unresolved payments") ||
		!strings.Contains(string(page.Body), "None: every payment") {
		i := strings.Index(string(page.Body), `id="unresolved"`)
		t.Errorf("the dashboard does not show that no payment is left unresolved: %.600s", string(page.Body)[max(i, 0):])
	}
	if got := s.metric(t, "payserver_order_resolutions_total", `by="close"`); got < 2 {
		t.Errorf("payserver_order_resolutions_total{by=close} = %v, want at least 2", got)
	}
}

// TestAdmissionIsRecordedInTheOrder: the order shows the limiter's
// admission: Redis's time, the window keys and the limits version.
func TestAdmissionIsRecordedInTheOrder(t *testing.T) {
	addr := freePort(t)
	emu := startEmulator(t, "")
	tag := runTag()
	s := gatewayServer(t, addr, emu.base(), fmt.Sprintf(gatewayLimits, tag), "", nil)
	before := time.Now().UnixMicro()
	o := s.pay(t, payBody("adm-1-"+tag, "THR_"+tag, "ALIPAY")).JSON(t)
	adm, _ := o["admission"].(map[string]any)
	if adm == nil {
		t.Fatalf("no admission in %v", o)
	}
	at := int64(adm["admittedAtUs"].(float64))
	if at < before-2_000_000 || at > time.Now().UnixMicro()+2_000_000 {
		t.Fatalf("admittedAtUs %d is not about now", at)
	}
	keys, _ := adm["windowKeys"].([]any)
	if len(keys) == 0 || !strings.Contains(fmt.Sprint(keys), "THR") || adm["limitsVersion"] == "" {
		t.Fatalf("admission %v: want the THR window keys and a limits version", adm)
	}
	if got := s.do(t, http.MethodGet, "/pay/adm-1-"+tag, nil, nil).JSON(t)["admission"]; fmt.Sprint(got) != fmt.Sprint(adm) {
		t.Fatalf("GET shows %v, POST answered %v", got, adm)
	}
	rep := s.do(t, http.MethodGet, "/reports/admissions?channel=ALIPAY&from=-5m", nil, nil)
	if rep.Status != 200 || !strings.Contains(string(rep.Body), `"requestId":"adm-1-`+tag+`"`) ||
		!strings.Contains(string(rep.Body), fmt.Sprintf(`"admittedAtUs":%d`, at)) {
		t.Fatalf("the admissions report does not list the payment at its admission: %d %s", rep.Status, rep.Body)
	}
}

// TestResolverQueriesAreLimited: with RESOLVE:ALIPAY at 2 a second, a
// burst of UNKNOWN orders is queried at most 2 a second: the ledger's
// receive times show it, up to the calls in flight.
func TestResolverQueriesAreLimited(t *testing.T) {
	addr := freePort(t)
	emu := startEmulator(t, "")
	tag := runTag()
	s := gatewayServer(t, addr, emu.base(), "limits:\n  BURST:ALIPAY: 1000\n  RESOLVE:ALIPAY: [{limit: 2, window: 1s}]\n", "", nil)
	emu.set("ALIPAY", map[string]any{"lostAnswerRate": 1})
	const n = 16
	ids := make([]string, n)
	parallel(n, n, func(i int) {
		ids[i] = fmt.Sprintf("burst-%d-%s", i, tag)
		s.pay(t, payBody(ids[i], "BURST", "ALIPAY"))
	})
	emu.calm("ALIPAY")
	for _, id := range ids {
		waitResolved(t, s, id, 30*time.Second)
	}
	var queries []int64
	for _, l := range emu.ledgerLines() {
		if l.Op == "query" {
			queries = append(queries, l.ReceivedAtUs)
		}
	}
	if len(queries) < n {
		t.Fatalf("%d queries for %d orders", len(queries), n)
	}
	// 2 admitted per second by Redis time; the receive times can bunch by
	// the calls in flight (the resolver's 4 workers) at most.
	if most := maxInAnyWindow(queries, time.Second); most > 2+4 {
		t.Fatalf("%d queries in one second, want at most 2 (+ calls in flight)", most)
	}
	if span := time.Duration(queries[len(queries)-1]-queries[0]) * time.Microsecond; span < time.Duration(n/2-2)*time.Second {
		t.Fatalf("%d queries in %v: faster than 2 a second", len(queries), span)
	}
	checkAgainstLedger(t, s, emu, ids)
}

// TestKillsMidResolutionLoseNothing: payserver killed (-9) while it
// resolves, and the emulator killed (-9) mid-call: after both restart,
// every order is resolved once, as the ledger says.
func TestKillsMidResolutionLoseNothing(t *testing.T) {
	addr := freePort(t)
	emu := startEmulator(t, "")
	tag := runTag()
	limits := "limits:\n  KILL:ALIPAY: 1000\n  RESOLVE:ALIPAY: [{limit: 2, window: 1s}]\n"
	s := gatewayServer(t, addr, emu.base(), limits, "", nil) // a restart keeps its database
	var ids []string
	var mu sync.Mutex
	emu.set("ALIPAY", map[string]any{"lostAnswerRate": 0.5, "dropRate": 0.5})
	parallel(10, 10, func(i int) {
		id := fmt.Sprintf("kill-a%d-%s", i, tag)
		mu.Lock()
		ids = append(ids, id)
		mu.Unlock()
		s.pay(t, payBody(id, "KILL", "ALIPAY"))
	})
	emu.calm("ALIPAY")
	time.Sleep(1500 * time.Millisecond) // some resolved, most not (2 queries a second)
	_ = s.cmd.Process.Kill()
	<-s.done
	s.start()

	// The emulator killed with calls in flight: they were decided (or not)
	// before the kill, and its books say which.
	emu.set("ALIPAY", map[string]any{"latencyMs": 3000})
	var wg sync.WaitGroup
	for i := range 5 {
		id := fmt.Sprintf("kill-b%d-%s", i, tag)
		ids = append(ids, id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.pay(t, payBody(id, "KILL", "ALIPAY"))
		}()
	}
	time.Sleep(300 * time.Millisecond)
	emu.kill9()
	wg.Wait()
	emu.start()
	for _, id := range ids {
		waitResolved(t, s, id, 60*time.Second)
	}
	checkAgainstLedger(t, s, emu, ids)
}

// runTag makes the bizTypes and requestIds of one run its own: the test
// Redis keeps windows across runs.
func runTag() string {
	return strings.ToUpper(strconv.FormatInt(time.Now().UnixNano()%(1<<40), 36))
}
