package emulator

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"payserver/internal/channel/gateway"
)

func TestPaySucceedsByDefault(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	before := time.Now().UnixMicro()
	r := h.pay("ALIPAY", "o-1", 1250)
	after := time.Now().UnixMicro()
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("pay: %v %d %s", r.err, r.status, r.body)
	}
	if r.answer.Outcome != gateway.Succeeded || r.answer.OrderNo != "o-1" || !strings.HasPrefix(r.answer.TradeNo, "EMU-ALIPAY-") {
		t.Fatalf("answer %+v, want SUCCEEDED o-1 with an EMU-ALIPAY- trade number", r.answer)
	}
	lines := h.ledger(-1)
	if len(lines) != 1 {
		t.Fatalf("ledger has %d lines, want 1", len(lines))
	}
	got := lines[0]
	if got.Seq < 1 || got.ReceivedAtUs < before || got.ReceivedAtUs > after {
		t.Errorf("seq %d receivedAtUs %d, want seq >= 1 and a time in [%d, %d]", got.Seq, got.ReceivedAtUs, before, after)
	}
	want := Line{Op: OpPay, Channel: "ALIPAY", OrderNo: "o-1", RequestID: "req-o-1", Amount: 1250, Currency: "CNY", Outcome: gateway.Succeeded, MoneyMoved: true, TradeNo: r.answer.TradeNo}
	if withoutTimes(got) != want {
		t.Errorf("line\n got %+v\nwant %+v", withoutTimes(got), want)
	}
}

// The wire format of a line is the contract: exact names, moneyMoved
// always present, tradeNo only when there is one.
func TestLedgerLineJSON(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.pay("WECHAT", "o-1", 7)
	h.query("WECHAT", "o-404")
	resp, err := h.client.Get(h.srv.URL + "/ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rows []map[string]any
	dec := json.NewDecoder(resp.Body)
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, m)
	}
	if len(rows) != 2 {
		t.Fatalf("%d lines, want 2", len(rows))
	}
	wantKeys := []string{"amount", "channel", "currency", "moneyMoved", "op", "orderNo", "outcome", "receivedAtUs", "requestId", "seq"}
	for i, row := range rows {
		for _, k := range wantKeys {
			if _, ok := row[k]; !ok {
				t.Errorf("line %d %v has no %q", i, row, k)
			}
		}
	}
	if _, ok := rows[0]["tradeNo"]; !ok || rows[0]["moneyMoved"] != true {
		t.Errorf("pay line %v: want a tradeNo and moneyMoved true", rows[0])
	}
	if _, ok := rows[1]["tradeNo"]; ok || rows[1]["moneyMoved"] != false || rows[1]["outcome"] != "NOT_FOUND" {
		t.Errorf("query line %v: want no tradeNo, moneyMoved false, NOT_FOUND", rows[1])
	}
}

func TestPayIsIdempotent(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	first := h.pay("ALIPAY", "o-1", 100)
	second := h.pay("ALIPAY", "o-1", 100)
	if second.answer != first.answer {
		t.Fatalf("replay %+v, want the first answer %+v", second.answer, first.answer)
	}
	// One orderNo on another channel is another order.
	other := h.pay("WECHAT", "o-1", 100)
	if other.answer.TradeNo == first.answer.TradeNo {
		t.Errorf("WECHAT o-1 got ALIPAY's trade number %s", other.answer.TradeNo)
	}
	lines := h.ledger(-1)
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3", len(lines))
	}
	replay := Line{Op: OpPay, Channel: "ALIPAY", OrderNo: "o-1", RequestID: "req-o-1", Amount: 100, Currency: "CNY", Outcome: gateway.Succeeded, MoneyMoved: false, TradeNo: first.answer.TradeNo}
	if got := withoutTimes(lines[1]); got != replay {
		t.Errorf("replay line\n got %+v\nwant %+v", got, replay)
	}
	if !lines[2].MoneyMoved {
		t.Errorf("WECHAT's first pay did not move money: %+v", lines[2])
	}
}

func TestDecline(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.mustAdmin("UNIONPAY", `{"declineRate":1}`)
	r := h.pay("UNIONPAY", "o-1", 100)
	want := gateway.Answer{OrderNo: "o-1", Outcome: gateway.Declined, Code: "INSUFFICIENT_FUNDS", Reason: "emulated decline"}
	if r.answer != want {
		t.Fatalf("answer %+v, want %+v", r.answer, want)
	}
	h.mustAdmin("UNIONPAY", `{"declineRate":0}`)
	if again := h.pay("UNIONPAY", "o-1", 100); again.answer != want {
		t.Errorf("replay %+v, want the remembered decline", again.answer)
	}
	if q := h.query("UNIONPAY", "o-1"); q.answer != want {
		t.Errorf("query %+v, want the decline", q.answer)
	}
	for _, l := range h.ledger(-1) {
		if l.MoneyMoved || l.Outcome != gateway.Declined || l.Code != "INSUFFICIENT_FUNDS" {
			t.Errorf("line %+v: want DECLINED INSUFFICIENT_FUNDS without money", l)
		}
	}
}

func TestThrottle(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.mustAdmin("ALIPAY", `{"throttleCapacity":2,"throttleWindowMs":400}`)
	start := time.Now()
	for _, no := range []string{"a", "b"} {
		if r := h.pay("ALIPAY", no, 1); r.answer.Outcome != gateway.Succeeded {
			t.Fatalf("pay %s: %+v, want SUCCEEDED", no, r.answer)
		}
	}
	// A replay is not a new payment: answered, not throttled.
	if r := h.pay("ALIPAY", "a", 1); r.answer.Outcome != gateway.Succeeded {
		t.Errorf("replay of a: %+v, want SUCCEEDED", r.answer)
	}
	// Past capacity: THROTTLED, again and again; none of them counts.
	for range 5 {
		r := h.pay("ALIPAY", "c", 1)
		if r.answer.Outcome != gateway.Throttled || r.answer.RetryAfterMs < 1 || r.answer.RetryAfterMs > 400 {
			t.Fatalf("pay c: %+v, want THROTTLED with retryAfterMs in [1, 400]", r.answer)
		}
	}
	if q := h.query("ALIPAY", "c"); q.answer.Outcome != gateway.NotFound {
		t.Errorf("query of throttled c: %+v, want NOT_FOUND (not remembered)", q.answer)
	}
	// Another channel has its own window.
	if r := h.pay("WECHAT", "c", 1); r.answer.Outcome != gateway.Succeeded {
		t.Errorf("WECHAT pay: %+v, want SUCCEEDED", r.answer)
	}
	// Once a and b leave the window, exactly two fit again: the refused
	// calls did not push the window.
	time.Sleep(time.Until(start.Add(450 * time.Millisecond)))
	for _, no := range []string{"c", "d"} {
		if r := h.pay("ALIPAY", no, 1); r.answer.Outcome != gateway.Succeeded {
			t.Fatalf("pay %s after the window: %+v, want SUCCEEDED", no, r.answer)
		}
	}
	if r := h.pay("ALIPAY", "e", 1); r.answer.Outcome != gateway.Throttled {
		t.Errorf("third pay of the new window: %+v, want THROTTLED", r.answer)
	}
	for _, l := range h.ledger(-1) {
		if l.Outcome == gateway.Throttled && (l.MoneyMoved || l.TradeNo != "") {
			t.Errorf("throttled line %+v moved money", l)
		}
	}
}

func TestLostAnswerIsProcessed(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.mustAdmin("ALIPAY", `{"lostAnswerRate":1,"holdMs":0}`)
	r := h.pay("ALIPAY", "o-1", 500)
	if r.err == nil {
		t.Fatalf("pay answered %d %s, want no answer", r.status, r.body)
	}
	if !errors.Is(r.err, io.EOF) {
		t.Errorf("client saw %v, want EOF (closed without an answer)", r.err)
	}
	line := h.lastLine()
	if line.Outcome != gateway.Succeeded || !line.MoneyMoved || line.Fault != FaultLostAnswer || line.TradeNo == "" {
		t.Fatalf("line %+v, want SUCCEEDED, moneyMoved, fault lostAnswer, a tradeNo", line)
	}
	h.mustAdmin("ALIPAY", `{"lostAnswerRate":0}`)
	q := h.query("ALIPAY", "o-1")
	if q.answer.Outcome != gateway.Succeeded || q.answer.TradeNo != line.TradeNo {
		t.Errorf("query %+v, want SUCCEEDED %s", q.answer, line.TradeNo)
	}
	if again := h.pay("ALIPAY", "o-1", 500); again.answer.TradeNo != line.TradeNo || h.lastLine().MoneyMoved {
		t.Errorf("replay %+v / %+v, want the lost answer's trade, no money moved", again.answer, h.lastLine())
	}
}

// A lost answer holds the connection until the client gives up; its
// decision is in the books while the client still waits.
func TestLostAnswerHoldsUntilTheClientGivesUp(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.mustAdmin("ALIPAY", `{"lostAnswerRate":1,"holdMs":60000}`)
	done := make(chan reply, 1)
	client := &http.Client{Timeout: 400 * time.Millisecond}
	go func() {
		done <- h.callWith(client, "ALIPAY", OpPay, payRequest("o-1", 5), []byte(testSecret), time.Now())
	}()
	deadline := time.Now().Add(300 * time.Millisecond)
	for len(h.ledger(-1)) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("the call ended before its decision was seen in the books: %+v", r)
	default:
	}
	if l := h.lastLine(); !l.MoneyMoved || l.Fault != FaultLostAnswer {
		t.Errorf("line while held %+v, want the decided payment", l)
	}
	r := <-done
	var timeout interface{ Timeout() bool }
	if r.err == nil || !errors.As(r.err, &timeout) || !timeout.Timeout() {
		t.Errorf("client saw %v, want its own timeout", r.err)
	}
}

// Refused, dropped and failed calls are never processed: the order stays
// unknown, and the next pay is its first.
func TestUnprocessedFaults(t *testing.T) {
	for _, tc := range []struct {
		name, behaviour string
		line            Line
		minTime         time.Duration
		sees            func(reply) bool // what the client sees
		want            string
	}{
		{"refuse", `{"refuseRate":1}`, Line{Outcome: OutcomeNone, Fault: FaultRefuse}, 0,
			func(r reply) bool { return errors.Is(r.err, syscall.ECONNRESET) }, "a connection reset"},
		{"drop", `{"dropRate":1,"holdMs":50}`, Line{Outcome: OutcomeNone, Fault: FaultDrop}, 50 * time.Millisecond,
			func(r reply) bool { return errors.Is(r.err, io.EOF) }, "EOF after holdMs (closed without an answer)"},
		{"error", `{"errorRate":1}`, Line{Outcome: OutcomeError, Fault: FaultError, Code: "SYSTEM_ERROR"}, 0,
			func(r reply) bool {
				return r.status == http.StatusServiceUnavailable && strings.Contains(string(r.body), `"SYSTEM_ERROR"`)
			}, "503 SYSTEM_ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{})
			h.mustAdmin("WECHAT", tc.behaviour)
			start := time.Now()
			if r := h.pay("WECHAT", "o-1", 9); !tc.sees(r) {
				t.Errorf("client saw %d %s %v, want %s", r.status, r.body, r.err, tc.want)
			}
			if took := time.Since(start); took < tc.minTime {
				t.Errorf("the call ended after %v, want at least %v", took, tc.minTime)
			}
			want := Line{Op: OpPay, Channel: "WECHAT", OrderNo: "o-1", RequestID: "req-o-1", Amount: 9, Currency: "CNY", Outcome: tc.line.Outcome, Code: tc.line.Code, Fault: tc.line.Fault}
			if got := withoutTimes(h.lastLine()); got != want {
				t.Errorf("line\n got %+v\nwant %+v", got, want)
			}
			h.mustAdmin("WECHAT", `{"refuseRate":0,"dropRate":0,"errorRate":0}`)
			if q := h.query("WECHAT", "o-1"); q.answer.Outcome != gateway.NotFound {
				t.Errorf("query afterwards: %+v, want NOT_FOUND", q.answer)
			}
			if p := h.pay("WECHAT", "o-1", 9); p.answer.Outcome != gateway.Succeeded || !h.lastLine().MoneyMoved {
				t.Errorf("pay afterwards: %+v, want a first SUCCEEDED", p.answer)
			}
		})
	}
}

func TestCloseBeforeProcessing(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c := h.call("ALIPAY", OpClose, gateway.OrderRequest{OrderNo: "o-1", RequestID: "req-o-1"})
	if want := (gateway.Answer{OrderNo: "o-1", Outcome: gateway.Closed}); c.answer != want {
		t.Fatalf("close %+v, want %+v", c.answer, want)
	}
	p := h.pay("ALIPAY", "o-1", 300)
	if p.answer.Outcome != gateway.Declined || p.answer.Code != "ORDER_CLOSED" {
		t.Fatalf("pay after close: %+v, want DECLINED ORDER_CLOSED", p.answer)
	}
	if q := h.query("ALIPAY", "o-1"); q.answer.Outcome != gateway.NotFound {
		t.Errorf("query of a closed, unprocessed order: %+v, want NOT_FOUND", q.answer)
	}
	if again := h.closeOrder("ALIPAY", "o-1"); again.answer.Processed {
		t.Errorf("second close %+v, want processed false", again.answer)
	}
	lines := h.ledger(-1)
	wantLines := []Line{
		{Op: OpClose, Channel: "ALIPAY", OrderNo: "o-1", RequestID: "req-o-1", Outcome: gateway.Closed},
		{Op: OpPay, Channel: "ALIPAY", OrderNo: "o-1", RequestID: "req-o-1", Amount: 300, Currency: "CNY", Outcome: gateway.Declined, Code: "ORDER_CLOSED"},
		{Op: OpQuery, Channel: "ALIPAY", OrderNo: "o-1", RequestID: "req-o-1", Outcome: gateway.NotFound},
		{Op: OpClose, Channel: "ALIPAY", OrderNo: "o-1", RequestID: "req-o-1", Outcome: gateway.Closed},
	}
	if len(lines) != len(wantLines) {
		t.Fatalf("%d lines, want %d", len(lines), len(wantLines))
	}
	for i, want := range wantLines {
		if got := withoutTimes(lines[i]); got != want {
			t.Errorf("line %d\n got %+v\nwant %+v", i, got, want)
		}
	}
}

func TestCloseAfterProcessing(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	p := h.pay("ALIPAY", "o-1", 300)
	c := h.closeOrder("ALIPAY", "o-1")
	want := gateway.Answer{OrderNo: "o-1", Outcome: gateway.Closed, Processed: true, Result: gateway.Succeeded}
	if c.answer != want {
		t.Fatalf("close %+v, want %+v", c.answer, want)
	}
	if again := h.pay("ALIPAY", "o-1", 300); again.answer != p.answer {
		t.Errorf("pay after close %+v, want the first answer %+v", again.answer, p.answer)
	}
	// The close line carries the order's books (requestId, amount).
	lines := h.ledger(-1)
	closeLine := Line{Op: OpClose, Channel: "ALIPAY", OrderNo: "o-1", RequestID: "req-o-1", Amount: 300, Currency: "CNY", Outcome: gateway.Closed, TradeNo: p.answer.TradeNo}
	if got := withoutTimes(lines[1]); got != closeLine {
		t.Errorf("close line\n got %+v\nwant %+v", got, closeLine)
	}
	h.mustAdmin("WECHAT", `{"declineRate":1}`)
	h.pay("WECHAT", "o-2", 1)
	if c := h.closeOrder("WECHAT", "o-2"); c.answer.Result != gateway.Declined || !c.answer.Processed {
		t.Errorf("close of a declined order %+v, want processed, result DECLINED", c.answer)
	}
}

func TestProcessing(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.mustAdmin("ALIPAY", `{"processingRate":1,"processingMs":300}`)
	p := h.pay("ALIPAY", "o-1", 40)
	if want := (gateway.Answer{OrderNo: "o-1", Outcome: gateway.Processing}); p.answer != want {
		t.Fatalf("pay %+v, want %+v", p.answer, want)
	}
	line := h.lastLine()
	if line.Outcome != gateway.Processing || !line.MoneyMoved || line.TradeNo == "" {
		t.Errorf("pay line %+v, want PROCESSING with the money moved and its trade number", line)
	}
	if q := h.query("ALIPAY", "o-1"); q.answer.Outcome != gateway.Processing {
		t.Errorf("query before the decision: %+v, want PROCESSING", q.answer)
	}
	if r := h.pay("ALIPAY", "o-1", 40); r.answer.Outcome != gateway.Processing {
		t.Errorf("replay before the decision: %+v, want PROCESSING", r.answer)
	}
	time.Sleep(350 * time.Millisecond)
	final := gateway.Answer{OrderNo: "o-1", Outcome: gateway.Succeeded, TradeNo: line.TradeNo}
	if q := h.query("ALIPAY", "o-1"); q.answer != final {
		t.Errorf("query after the decision: %+v, want %+v", q.answer, final)
	}
	if r := h.pay("ALIPAY", "o-1", 40); r.answer != final {
		t.Errorf("replay after the decision: %+v, want %+v", r.answer, final)
	}

	// A close while PROCESSING tells the outcome, and queries follow it.
	h.pay("ALIPAY", "o-2", 40)
	c := h.closeOrder("ALIPAY", "o-2")
	if !c.answer.Processed || c.answer.Result != gateway.Succeeded {
		t.Errorf("close while processing: %+v, want processed SUCCEEDED", c.answer)
	}
	if q := h.query("ALIPAY", "o-2"); q.answer.Outcome != gateway.Succeeded {
		t.Errorf("query after the close: %+v, want SUCCEEDED", q.answer)
	}
}

func TestPause(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.mustAdmin("ALIPAY", `{"pauseMs":300}`)
	sent := time.Now()
	r := h.pay("ALIPAY", "o-1", 1)
	if waited := time.Since(sent); waited < 280*time.Millisecond {
		t.Errorf("answered after %v, want after the 300 ms pause", waited)
	}
	if r.answer.Outcome != gateway.Succeeded {
		t.Fatalf("pay after the pause: %+v, want SUCCEEDED", r.answer)
	}
	if l := h.lastLine(); l.ReceivedAtUs-sent.UnixMicro() > 100_000 {
		t.Errorf("receivedAtUs %d is %d µs after the call was sent: want the arrival, not the end of the pause", l.ReceivedAtUs, l.ReceivedAtUs-sent.UnixMicro())
	}
	// Other channels are not paused; pauseMs 0 releases the waiting calls.
	h.mustAdmin("WECHAT", `{"pauseMs":60000}`)
	var shown struct{ PauseMs int64 }
	if _, body := h.admin("WECHAT", `{}`); json.Unmarshal(body, &shown) != nil || shown.PauseMs < 55_000 || shown.PauseMs > 60_000 {
		t.Errorf("behaviour after a pause: %s, want the pause left (about 60000 ms)", body)
	}
	done := make(chan reply, 1)
	go func() { done <- h.pay("WECHAT", "o-2", 1) }()
	if r := h.pay("UNIONPAY", "o-2", 1); r.answer.Outcome != gateway.Succeeded {
		t.Errorf("UNIONPAY during WECHAT's pause: %+v", r.answer)
	}
	select {
	case r := <-done:
		t.Fatalf("WECHAT answered during its pause: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	h.mustAdmin("WECHAT", `{"pauseMs":0}`)
	select {
	case r := <-done:
		if r.answer.Outcome != gateway.Succeeded {
			t.Errorf("WECHAT after the pause: %+v", r.answer)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the waiting call was not released by pauseMs 0")
	}
}

func TestLatency(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.mustAdmin("ALIPAY", `{"latencyMs":{"min":100,"max":150}}`)
	start := time.Now()
	r := h.pay("ALIPAY", "o-1", 1)
	if took := time.Since(start); took < 100*time.Millisecond || r.answer.Outcome != gateway.Succeeded {
		t.Errorf("answered %+v after %v, want SUCCEEDED after at least 100 ms", r.answer, took)
	}
}

// A call whose client gave up during the latency is still decided: the
// payment appears after the client's timeout, as at a real channel.
func TestLatencyOutlivesTheClient(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.mustAdmin("ALIPAY", `{"latencyMs":300}`)
	client := &http.Client{Timeout: 100 * time.Millisecond}
	if r := h.callWith(client, "ALIPAY", OpPay, payRequest("o-1", 1), []byte(testSecret), time.Now()); r.err == nil {
		t.Fatalf("answered %+v before the latency", r)
	}
	h.mustAdmin("ALIPAY", `{"latencyMs":0}`)
	if q := h.query("ALIPAY", "o-1"); q.answer.Outcome != gateway.NotFound {
		t.Errorf("query during the latency: %+v, want NOT_FOUND", q.answer)
	}
	time.Sleep(350 * time.Millisecond)
	if q := h.query("ALIPAY", "o-1"); q.answer.Outcome != gateway.Succeeded {
		t.Errorf("query after the latency: %+v, want SUCCEEDED", q.answer)
	}
}

func TestBadSignatureChangesNothing(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for _, tc := range []struct {
		name     string
		secret   []byte
		signedAt time.Time
	}{
		{"wrong secret", []byte("not-the-secret"), time.Now()},
		{"stale", []byte(testSecret), time.Now().Add(-gateway.MaxSkew - time.Minute)},
		{"unsigned", nil, time.Now()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.callWith(h.client, "ALIPAY", OpPay, payRequest("o-1", 1), tc.secret, tc.signedAt)
			if r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), `"BAD_SIGNATURE"`) {
				t.Fatalf("got %d %s, want 401 BAD_SIGNATURE", r.status, r.body)
			}
			want := Line{Op: OpPay, Channel: "ALIPAY", OrderNo: "o-1", RequestID: "req-o-1", Amount: 1, Currency: "CNY", Outcome: OutcomeError, Code: "BAD_SIGNATURE"}
			if got := withoutTimes(h.lastLine()); got != want {
				t.Errorf("line\n got %+v\nwant %+v", got, want)
			}
		})
	}
	if r := h.closeOrder("ALIPAY", "o-1"); r.answer.Processed {
		t.Errorf("close after refused pays: %+v, want processed false", r.answer)
	}
	if strings.Contains(h.logs.String(), testSecret) {
		t.Error("the log carries the secret")
	}
	if !strings.Contains(h.logs.String(), "bad or stale signature") {
		t.Errorf("the refusal was not logged: %s", h.logs.String())
	}
}

func TestInvalidBodies(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for name, body := range map[string]any{
		"no orderNo":    gateway.PayRequest{RequestID: "r", Amount: 1, Currency: "CNY"},
		"zero amount":   gateway.PayRequest{OrderNo: "o", RequestID: "r", Currency: "CNY"},
		"bad currency":  gateway.PayRequest{OrderNo: "o", RequestID: "r", Amount: 1, Currency: "cny"},
		"unknown field": map[string]any{"orderNo": "o", "requestId": "r", "amount": 1, "currency": "CNY", "tip": 1},
	} {
		t.Run(name, func(t *testing.T) {
			if r := h.call("ALIPAY", OpPay, body); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"INVALID_REQUEST"`) {
				t.Errorf("got %d %s, want 400 INVALID_REQUEST", r.status, r.body)
			}
		})
	}
	if r := h.call("ALIPAY", OpQuery, map[string]string{"requestId": "r"}); r.status != http.StatusBadRequest {
		t.Errorf("query without orderNo: %d %s, want 400", r.status, r.body)
	}
}

func TestRouting(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodPost, "/PAYPAL/pay", http.StatusNotFound},
		{http.MethodPost, "/ALIPAY/refund", http.StatusNotFound},
		{http.MethodGet, "/ALIPAY/pay", http.StatusMethodNotAllowed},
		{http.MethodGet, "/admin/channels/PAYPAL", http.StatusNotFound},
		{http.MethodPost, "/ledger", http.StatusMethodNotAllowed},
		{http.MethodGet, "/ledger?since=yesterday", http.StatusBadRequest},
		{http.MethodGet, "/nowhere/at/all", http.StatusNotFound},
	} {
		req, _ := http.NewRequest(tc.method, h.srv.URL+tc.path, strings.NewReader("{}"))
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body errorBody
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || err != nil || body.Error.Code == "" {
			t.Errorf("%s %s: %d (JSON error %v, code %q), want %d with a JSON error", tc.method, tc.path, resp.StatusCode, err, body.Error.Code, tc.status)
		}
	}
}

func TestAdminFromAnotherMachine(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for _, path := range []string{"/admin/channels/ALIPAY", "/ledger"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr = "10.1.2.3:5555"
		rec := httptest.NewRecorder()
		h.em.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), `"FORBIDDEN"`) {
			t.Errorf("GET %s from 10.1.2.3: %d %s, want 403 FORBIDDEN", path, rec.Code, rec.Body)
		}
	}
}

func TestAdmin(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	resp, err := h.client.Get(h.srv.URL + "/admin/channels/ALIPAY")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if got["latencyMs"] != 0.0 || got["declineRate"] != 0.0 || got["throttleCapacity"] != 0.0 || got["processingMs"] != 1000.0 || got["notify"] != false {
		t.Errorf("default behaviour %v", got)
	}
	for _, tc := range []struct {
		body, field string
	}{
		{`{"declineRate":1.5}`, "declineRate"},
		{`{"dropRate":-0.1}`, "dropRate"},
		{`{"lostAnswerRate":"high"}`, "lostAnswerRate"},
		{`{"refuseRate":null}`, "refuseRate"},
		{`{"latencyMs":-1}`, "latencyMs"},
		{`{"latencyMs":{"min":50,"max":10}}`, "latencyMs"},
		{`{"latencyMs":{"min":5}}`, "latencyMs"},
		{`{"throttleCapacity":-1}`, "throttleCapacity"},
		{`{"throttleWindowMs":0}`, "throttleWindowMs"},
		{`{"pauseMs":1.5}`, "pauseMs"},
		{`{"notify":"yes"}`, "notify"},
		{`{"notifyDuplicates":1000}`, "notifyDuplicates"},
		{`{"declineRate":0.5,"speed":1}`, "speed"},
		{`[1,2]`, ""},
		{`not json`, ""},
	} {
		t.Run(tc.body, func(t *testing.T) {
			status, out := h.admin("ALIPAY", tc.body)
			var e errorBody
			if err := json.Unmarshal(out, &e); err != nil || status != http.StatusBadRequest || e.Error.Field != tc.field || e.Error.Code != "INVALID_BEHAVIOUR" {
				t.Errorf("got %d %s, want 400 INVALID_BEHAVIOUR naming %q", status, out, tc.field)
			}
		})
	}
	if b, _ := h.em.Behaviour("ALIPAY"); !reflect.DeepEqual(b, DefaultBehaviour()) {
		t.Errorf("refused changes changed the behaviour: %+v", b)
	}
	status, out := h.admin("ALIPAY", `{"latencyMs":{"min":5,"max":20},"declineRate":0.25,"throttleCapacity":10,"notify":true,"notifyDuplicates":2}`)
	if status != http.StatusOK {
		t.Fatalf("admin: %d %s", status, out)
	}
	if !strings.Contains(string(out), `"latencyMs":{"max":20,"min":5}`) || !strings.Contains(string(out), `"declineRate":0.25`) {
		t.Errorf("answer %s, want the new behaviour", out)
	}
	want := DefaultBehaviour()
	want.Latency = Latency{Min: 5 * time.Millisecond, Max: 20 * time.Millisecond}
	want.DeclineRate, want.ThrottleCapacity, want.Notify, want.NotifyDuplicates = 0.25, 10, true, 2
	if b, _ := h.em.Behaviour("ALIPAY"); !reflect.DeepEqual(b, want) {
		t.Errorf("behaviour %+v, want %+v", b, want)
	}
	// A GET's answer can be posted back as it is.
	if status, out2 := h.admin("ALIPAY", string(out)); status != http.StatusOK {
		t.Errorf("posting the GET answer back: %d %s", status, out2)
	}
	if b, _ := h.em.Behaviour("WECHAT"); !reflect.DeepEqual(b, DefaultBehaviour()) {
		t.Errorf("WECHAT changed with ALIPAY: %+v", b)
	}
}

func TestBehaviourAtStart(t *testing.T) {
	p, err := ParseChannelPatch(`WECHAT={"declineRate":1}`)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{patches: []ChannelPatch{p}})
	if r := h.pay("WECHAT", "o-1", 1); r.answer.Outcome != gateway.Declined {
		t.Errorf("WECHAT: %+v, want DECLINED", r.answer)
	}
	if r := h.pay("ALIPAY", "o-1", 1); r.answer.Outcome != gateway.Succeeded {
		t.Errorf("ALIPAY: %+v, want SUCCEEDED", r.answer)
	}
	for _, bad := range []string{`WECHAT`, `={"declineRate":1}`, `WECHAT={"declineRate":2}`} {
		if _, err := ParseChannelPatch(bad); err == nil {
			t.Errorf("ParseChannelPatch(%q) took it", bad)
		}
	}
	_, err = New(Config{Channels: []string{"ALIPAY"}, Secret: []byte(testSecret), Store: h.store, Patches: []ChannelPatch{p}})
	if err == nil || !strings.Contains(err.Error(), "WECHAT") {
		t.Errorf("a behaviour for a channel not served: %v, want an error naming it", err)
	}
}

func TestNewRefuses(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for name, cfg := range map[string]Config{
		"no store":     {Channels: []string{"A"}, Secret: []byte(testSecret)},
		"no secret":    {Channels: []string{"A"}, Store: h.store},
		"short secret": {Channels: []string{"A"}, Secret: []byte("s"), Store: h.store},
		"keys of a channel not served": {Channels: []string{"A"}, Secret: []byte(testSecret), Store: h.store,
			Keys: map[string]gateway.Keys{"B": {testKey}}},
		"no channels":  {Secret: []byte(testSecret), Store: h.store},
		"bad code":     {Channels: []string{"ali pay"}, Secret: []byte(testSecret), Store: h.store},
		"twice":        {Channels: []string{"A", "A"}, Secret: []byte(testSecret), Store: h.store},
		"bad notifier": {Channels: []string{"A"}, Secret: []byte(testSecret), Store: h.store, NotifyURL: "ftp://x"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New took it", name)
		}
	}
}

func TestListenLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:0":  true,
		"localhost:0":  true,
		"0.0.0.0:0":    false,
		":0":           false,
		"10.0.0.1:0":   false,
		"example.com:": false,
		"127.0.0.1":    false, // no port
	} {
		ln, err := ListenLoopback(addr)
		if (err == nil) != ok {
			t.Errorf("ListenLoopback(%q): %v, want ok %v", addr, err, ok)
		}
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// Close releases held calls at once: a shutdown does not wait for holdMs.
func TestCloseReleasesHeldCalls(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.mustAdmin("ALIPAY", `{"dropRate":1,"holdMs":60000}`)
	done := make(chan reply, 1)
	go func() { done <- h.pay("ALIPAY", "o-1", 1) }()
	time.Sleep(100 * time.Millisecond)
	_ = h.em.Close()
	select {
	case r := <-done:
		if r.err == nil {
			t.Errorf("a dropped call was answered at shutdown: %+v", r)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the held call was not released by Close")
	}
}

// Concurrent pays of one order are decided once: one moves money, every
// answer carries its trade number. Without the per-order lock two of them
// would each find no order and charge it.
func TestConcurrentPaysOfOneOrder(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	const n = 20
	replies := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = h.pay("ALIPAY", "o-1", 100)
		}()
	}
	wg.Wait()
	for i, r := range replies {
		if r.answer.Outcome != gateway.Succeeded || r.answer.TradeNo != replies[0].answer.TradeNo {
			t.Errorf("pay %d: %+v, want SUCCEEDED %s like the others", i, r.answer, replies[0].answer.TradeNo)
		}
	}
	moved := 0
	for _, l := range h.ledger(-1) {
		if l.MoneyMoved {
			moved++
		}
	}
	if moved != 1 {
		t.Errorf("%d pay lines moved money, want 1", moved)
	}
}

// TestCloseBeforeCloseAfter: with closeAfterMs set, a close within that
// time of the order's first pay is refused (409, the channel's code) and
// changes nothing; a close after it, or of an order never paid, closes.
func TestCloseBeforeCloseAfter(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.mustAdmin("WECHAT", `{"closeAfterMs":300,"closeTooSoonCode":"ORDER_TOO_RECENT","dropRate":1,"holdMs":0}`)
	if r := h.pay("WECHAT", "o-1", 100); r.err == nil {
		t.Fatalf("a dropped pay was answered: %d %s", r.status, r.body)
	}
	h.mustAdmin("WECHAT", `{"dropRate":0}`)
	r := h.closeOrder("WECHAT", "o-1")
	if r.status != http.StatusConflict || !strings.Contains(string(r.body), `"ORDER_TOO_RECENT"`) {
		t.Fatalf("an early close: %d %s, want 409 ORDER_TOO_RECENT", r.status, r.body)
	}
	if got := h.lastLine(); got.Op != OpClose || got.Outcome != OutcomeError || got.Code != "ORDER_TOO_RECENT" {
		t.Errorf("early close line %+v, want an ERROR ORDER_TOO_RECENT", got)
	}
	if _, found := h.store.Order("WECHAT", "o-1"); found {
		t.Error("the refused close was remembered")
	}
	if r := h.closeOrder("WECHAT", "o-never-paid"); r.answer.Outcome != gateway.Closed {
		t.Errorf("close of an order never paid: %d %s, want CLOSED", r.status, r.body)
	}
	time.Sleep(300 * time.Millisecond)
	if r := h.closeOrder("WECHAT", "o-1"); r.answer.Outcome != gateway.Closed || r.answer.Processed {
		t.Errorf("a close after closeAfter: %d %s, want CLOSED unprocessed", r.status, r.body)
	}
}
