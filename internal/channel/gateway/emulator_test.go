package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"payserver/internal/channel"
	"payserver/internal/channel/emulator"
	"payserver/internal/channel/gateway"
)

const emuSecret = "gateway-emulator-test-secret-0123456789"

// emu is the channel emulator served over real HTTP on a loopback port.
type emu struct {
	t   testing.TB
	em  *emulator.Emulator
	srv *httptest.Server
}

func newEmu(t testing.TB) *emu {
	t.Helper()
	store, err := emulator.OpenStore(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	em, err := emulator.New(emulator.Config{Channels: []string{"ALIPAY", "WECHAT"}, Secret: []byte(emuSecret), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	e := &emu{t: t, em: em, srv: httptest.NewServer(em)}
	t.Cleanup(func() {
		_ = em.Close()
		e.srv.CloseClientConnections()
		e.srv.Close()
		_ = store.Close()
	})
	return e
}

// behave posts a behaviour change to the emulator's admin endpoint.
func (e *emu) behave(code, patch string) {
	e.t.Helper()
	resp, err := http.Post(e.srv.URL+"/admin/channels/"+code, "application/json", strings.NewReader(patch))
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("admin %s %s: status %d", code, patch, resp.StatusCode)
	}
}

// ledger reads GET /ledger, as a witness would.
func (e *emu) ledger() []emulator.Line {
	e.t.Helper()
	resp, err := http.Get(e.srv.URL + "/ledger")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []emulator.Line
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var l emulator.Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			e.t.Fatalf("ledger line %s: %v", sc.Bytes(), err)
		}
		lines = append(lines, l)
	}
	return lines
}

// lines returns the ledger's lines of op about orderNo.
func (e *emu) lines(op emulator.Op, orderNo string) []emulator.Line {
	var out []emulator.Line
	for _, l := range e.ledger() {
		if l.Op == op && l.OrderNo == orderNo {
			out = append(out, l)
		}
	}
	return out
}

func (e *emu) channel(code string) *gateway.Channel {
	e.t.Helper()
	ch, err := gateway.NewChannel(gateway.Config{
		Code: code, BaseURL: e.srv.URL + "/" + code, Secret: []byte(emuSecret), CallTimeout: 10 * time.Second,
	}, nil, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(ch.CloseIdle)
	return ch
}

func order(orderNo string) channel.Request {
	return channel.Request{OrderNo: orderNo, RequestID: "req-" + orderNo, MerchantID: "M1", Amount: 1250, Currency: "CNY"}
}

// TestPayOnTheWireOnce: the emulator decides a pay, holds its answer 2 s
// and closes the connection (a reused keep-alive one). The pay is an
// unknown outcome, and the emulator's ledger has exactly one pay line of
// the order: the transport did not send it again. A query that meets the
// same fate may be sent again.
func TestPayOnTheWireOnce(t *testing.T) {
	e := newEmu(t)
	ch := e.channel("ALIPAY")
	if _, err := ch.Pay(context.Background(), order("PS-WARM")); err != nil {
		t.Fatalf("warm-up pay: %v", err)
	}
	e.behave("ALIPAY", `{"lostAnswerRate":1,"holdMs":2000}`)
	_, err := ch.Pay(context.Background(), order("PS-1"))
	if err == nil || errors.Is(err, channel.ErrNotSent) {
		t.Fatalf("pay whose answer was lost: err %v, want an unknown outcome", err)
	}
	pays := e.lines(emulator.OpPay, "PS-1")
	if len(pays) != 1 {
		t.Fatalf("the ledger has %d pay lines of PS-1, want exactly 1: %+v", len(pays), pays)
	}
	if !pays[0].MoneyMoved || pays[0].Fault != emulator.FaultLostAnswer {
		t.Errorf("pay line %+v, want the one that moved money, its answer lost", pays[0])
	}
}

// TestOrderLinesCarryTheAmount: query and close lines carry the order's
// amount and currency, also for an order the emulator never processed.
func TestOrderLinesCarryTheAmount(t *testing.T) {
	e := newEmu(t)
	ch := e.channel("WECHAT")
	if _, err := ch.Query(context.Background(), order("PS-2")); !errors.Is(err, channel.ErrNotFound) {
		t.Fatalf("query of an unknown order: %v, want NOT_FOUND", err)
	}
	if _, err := ch.Close(context.Background(), order("PS-2")); err != nil {
		t.Fatalf("close: %v", err)
	}
	for _, op := range []emulator.Op{emulator.OpQuery, emulator.OpClose} {
		got := e.lines(op, "PS-2")
		if len(got) != 1 || got[0].Amount != 1250 || got[0].Currency != "CNY" || got[0].RequestID != "req-PS-2" {
			t.Errorf("%s lines %+v, want one with amount 1250 CNY and requestId req-PS-2", op, got)
		}
	}
}
