package emulator

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"payserver/internal/channel/gateway"
	"payserver/internal/testutil"
)

const testSecret = "emulator-test-secret-5f1c-0123456789abcdef"

// testKey is the key of testSecret, as the emulator names it.
var testKey = gateway.Key{ID: DefaultKeyID, Secret: []byte(testSecret)}

// harness is an emulator served on a loopback port with its ledger in a
// temporary file.
type harness struct {
	t      testing.TB
	path   string
	store  *Store
	em     *Emulator
	srv    *httptest.Server
	client *http.Client
	logs   *testutil.LogBuffer
}

// harnessOptions shape newHarness.
type harnessOptions struct {
	path      string // ledger file; "" is a new one
	notifyURL string
	patches   []ChannelPatch
	seed      uint64
}

func newHarness(t testing.TB, opts harnessOptions) *harness {
	t.Helper()
	if opts.path == "" {
		opts.path = filepath.Join(t.TempDir(), "ledger.db")
	}
	h := &harness{t: t, path: opts.path, logs: &testutil.LogBuffer{}}
	store, err := OpenStore(context.Background(), opts.path)
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	h.store = store
	em, err := New(Config{
		Channels:  []string{"ALIPAY", "WECHAT", "UNIONPAY"},
		Secret:    []byte(testSecret),
		Store:     store,
		Patches:   opts.patches,
		NotifyURL: opts.notifyURL,
		Logger:    slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Seed:      opts.seed,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.em = em
	h.srv = httptest.NewServer(em)
	h.client = &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(h.close)
	return h
}

// close stops the emulator, the server and the store (once).
func (h *harness) close() {
	if h.em == nil {
		return
	}
	_ = h.em.Close()
	h.srv.CloseClientConnections()
	h.srv.Close()
	if err := h.store.Close(); err != nil {
		h.t.Errorf("closing the store: %v", err)
	}
	h.em = nil
}

// reply is a gateway call's answer.
type reply struct {
	status int
	answer gateway.Answer
	body   []byte
	err    error // transport error: no answer
}

// call sends a signed gateway call with the harness's client.
func (h *harness) call(channel string, op Op, body any) reply {
	h.t.Helper()
	return h.callWith(h.client, channel, op, body, []byte(testSecret), time.Now())
}

// callWith sends body to /{channel}/{op} signed with secret at signedAt,
// and checks the answer's signature.
func (h *harness) callWith(c *http.Client, channel string, op Op, body any, secret []byte, signedAt time.Time) reply {
	h.t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		h.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/"+channel+"/"+string(op), bytes.NewReader(raw))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if secret != nil {
		gateway.Sign(req.Header, gateway.Key{ID: DefaultKeyID, Secret: secret}, gateway.Message{Method: http.MethodPost, Path: req.URL.Path, Body: raw}, signedAt)
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{status: resp.StatusCode, err: err}
	}
	if got := resp.Header.Get("Content-Type"); got != "application/json" {
		h.t.Errorf("%s %s: Content-Type %q, want application/json", channel, op, got)
	}
	if _, err := gateway.Verify(resp.Header, gateway.Keys{testKey}, gateway.Message{Method: http.MethodPost, Path: req.URL.Path, Body: out, Answer: true}, time.Now()); err != nil {
		h.t.Errorf("%s %s: answer's signature: %v", channel, op, err)
	}
	r := reply{status: resp.StatusCode, body: out}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(out, &r.answer); err != nil {
			h.t.Fatalf("%s %s: answer %s: %v", channel, op, out, err)
		}
	}
	return r
}

func payRequest(orderNo string, amount int64) gateway.PayRequest {
	return gateway.PayRequest{OrderNo: orderNo, RequestID: "req-" + orderNo, MerchantID: "M1", Amount: amount, Currency: "CNY", Subject: "test"}
}

func (h *harness) pay(channel, orderNo string, amount int64) reply {
	h.t.Helper()
	return h.call(channel, OpPay, payRequest(orderNo, amount))
}

func (h *harness) query(channel, orderNo string) reply {
	h.t.Helper()
	return h.call(channel, OpQuery, gateway.OrderRequest{OrderNo: orderNo})
}

func (h *harness) closeOrder(channel, orderNo string) reply {
	h.t.Helper()
	return h.call(channel, OpClose, gateway.OrderRequest{OrderNo: orderNo})
}

// admin posts a behaviour change and returns the status and body.
func (h *harness) admin(channel, body string) (int, []byte) {
	h.t.Helper()
	resp, err := h.client.Post(h.srv.URL+"/admin/channels/"+channel, "application/json", strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// mustAdmin posts a behaviour change that must be taken.
func (h *harness) mustAdmin(channel, body string) {
	h.t.Helper()
	if status, out := h.admin(channel, body); status != http.StatusOK {
		h.t.Fatalf("admin %s %s: %d %s", channel, body, status, out)
	}
}

// ledger reads GET /ledger (since < 0: no parameter).
func (h *harness) ledger(since int64) []Line {
	h.t.Helper()
	u := h.srv.URL + "/ledger"
	if since >= 0 {
		u += "?since=" + strconv.FormatInt(since, 10)
	}
	resp, err := h.client.Get(u)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		out, _ := io.ReadAll(resp.Body)
		h.t.Fatalf("GET /ledger: %d %s", resp.StatusCode, out)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/x-ndjson" {
		h.t.Errorf("GET /ledger Content-Type %q, want application/x-ndjson", got)
	}
	var lines []Line
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		var l Line
		if err := dec.Decode(&l); err != nil {
			h.t.Fatalf("ledger line %s: %v", sc.Bytes(), err)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		h.t.Fatal(err)
	}
	return lines
}

// lastLine is the newest ledger line.
func (h *harness) lastLine() Line {
	h.t.Helper()
	lines := h.ledger(-1)
	if len(lines) == 0 {
		h.t.Fatal("the ledger is empty")
	}
	return lines[len(lines)-1]
}

// withoutTimes blanks what differs from run to run (Seq and ReceivedAtUs
// are checked separately), to compare lines whole.
func withoutTimes(l Line) Line {
	l.Seq, l.ReceivedAtUs = 0, 0
	return l
}
