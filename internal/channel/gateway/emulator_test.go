package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"payserver/internal/channel"
	"payserver/internal/channel/emulator"
	"payserver/internal/channel/gateway"
)

const emuSecret = "gateway-emulator-test-secret-0123456789"

// emu is the channel emulator served over real HTTP on a loopback port,
// behind a recorder of the requests it gets and the answers it sends.
type emu struct {
	t   testing.TB
	em  *emulator.Emulator
	srv *httptest.Server

	mu      sync.Mutex
	wire    []exchange
	answers []exchange
}

// exchange is one message as it went over the wire.
type exchange struct {
	path   string
	header http.Header
	body   []byte
}

// ServeHTTP records the request and the emulator's answer.
func (e *emu) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	if strings.HasPrefix(r.URL.Path, "/admin/") || r.URL.Path == "/ledger" {
		e.em.ServeHTTP(w, r)
		return
	}
	e.em.ServeHTTP(rec, r)
	e.mu.Lock()
	e.wire = append(e.wire, exchange{path: r.URL.Path, header: r.Header.Clone(), body: body})
	e.answers = append(e.answers, exchange{path: r.URL.Path, header: rec.Header().Clone(), body: rec.Body.Bytes()})
	e.mu.Unlock()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// last returns the last request the emulator got on path, and its answer.
func (e *emu) last(path string) (exchange, exchange) {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.wire) - 1; i >= 0; i-- {
		if e.wire[i].path == path {
			return e.wire[i], e.answers[i]
		}
	}
	e.t.Fatalf("no request on %s", path)
	return exchange{}, exchange{}
}

// send posts x's headers and body to path as they are, and returns the
// status.
func (e *emu) send(x exchange, path string) int {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+path, bytes.NewReader(x.body))
	if err != nil {
		e.t.Fatal(err)
	}
	for _, h := range []string{"Content-Type", gateway.HeaderTimestamp, gateway.HeaderNonce, gateway.HeaderKeyID, gateway.HeaderSignature} {
		req.Header.Set(h, x.header.Get(h))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
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
	e := &emu{t: t, em: em}
	e.srv = httptest.NewServer(e)
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
	return e.channelWith(code, gateway.Keys{{ID: emulator.DefaultKeyID, Secret: []byte(emuSecret)}}, nil)
}

// channelWith is payserver's Channel to code with keys, its refused
// answers told to refused (nil: not told).
func (e *emu) channelWith(code string, keys gateway.Keys, refused func(gateway.Reason)) *gateway.Channel {
	e.t.Helper()
	ch, err := gateway.NewChannel(gateway.Config{
		Code: code, BaseURL: e.srv.URL + "/" + code, CallTimeout: 10 * time.Second, Keys: keys, Refused: refused,
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
