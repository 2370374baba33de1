package httpapi

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/channel"
	"payserver/internal/channel/emulator"
	"payserver/internal/channel/gateway"
	"payserver/internal/pay"
)

const notifySecret = "notify-test-secret-0123456789abcdefghij"

// notifyRecorder is the resolver's side of notifications: it records what
// it was told.
type notifyRecorder struct {
	mu   sync.Mutex
	got  []pay.Notification
	seen chan struct{}
}

func (n *notifyRecorder) Notify(_ context.Context, note pay.Notification) (*pay.Order, error) {
	n.mu.Lock()
	n.got = append(n.got, note)
	n.mu.Unlock()
	select {
	case n.seen <- struct{}{}:
	default:
	}
	return &pay.Order{}, nil
}

func (n *notifyRecorder) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.got)
}

// wireCapture keeps the last notification request as it arrived.
type wireCapture struct {
	next http.Handler
	mu   sync.Mutex
	last struct {
		header http.Header
		body   []byte
	}
}

func (c *wireCapture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.last.header, c.last.body = r.Header.Clone(), body
	c.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	c.next.ServeHTTP(w, r)
}

// TestNotificationReplays: the emulator's real notification is taken once;
// sent again with its nonce it is refused as replayed, sent to another
// channel's path it is refused for its signature, and neither reaches the
// resolver; both are counted by reason.
func TestNotificationReplays(t *testing.T) {
	gin.SetMode(gin.TestMode)
	rec := &notifyRecorder{seen: make(chan struct{}, 1)}
	var mu sync.Mutex
	refused := map[string]int{}
	keys := gateway.Keys{{ID: emulator.DefaultKeyID, Secret: []byte(notifySecret)}}
	h, err := New(Options{Pay: noPay{}, Logger: slog.New(slog.DiscardHandler), Notify: &NotifyOptions{
		Notifier: rec,
		Keys:     func(code string) (gateway.Keys, bool) { return keys, code == "ALIPAY" || code == "WECHAT" },
		Nonces:   gateway.NewNonceCache(100),
		Refused: func(ch string, r gateway.Reason) {
			mu.Lock()
			refused[ch+"/"+string(r)]++
			mu.Unlock()
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	capture := &wireCapture{next: h}
	payserver := httptest.NewServer(capture)
	defer payserver.Close()

	store, err := emulator.OpenStore(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p, _ := emulator.ParseChannelPatch(`ALIPAY={"notify":true}`)
	em, err := emulator.New(emulator.Config{Channels: []string{"ALIPAY", "WECHAT"}, Secret: []byte(notifySecret), Store: store,
		Patches: []emulator.ChannelPatch{p}, NotifyURL: payserver.URL})
	if err != nil {
		t.Fatal(err)
	}
	emuSrv := httptest.NewServer(em)
	defer func() { _ = em.Close(); emuSrv.Close() }()
	ch, err := gateway.NewChannel(gateway.Config{Code: "ALIPAY", BaseURL: emuSrv.URL + "/ALIPAY", Keys: keys}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.CloseIdle()
	if _, err := ch.Pay(context.Background(), channel.Request{OrderNo: "PS-1", RequestID: "r-1", MerchantID: "M1", Amount: 100, Currency: "CNY"}); err != nil {
		t.Fatalf("pay: %v", err)
	}
	select {
	case <-rec.seen:
	case <-time.After(5 * time.Second):
		t.Fatal("no notification in 5 s")
	}

	capture.mu.Lock()
	header, body := capture.last.header, capture.last.body
	capture.mu.Unlock()
	send := func(path string) int {
		req, _ := http.NewRequest(http.MethodPost, payserver.URL+path, bytes.NewReader(body))
		for _, k := range []string{"Content-Type", gateway.HeaderTimestamp, gateway.HeaderNonce, gateway.HeaderKeyID, gateway.HeaderSignature} {
			req.Header.Set(k, header.Get(k))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := send("/channels/ALIPAY/notify"); got != http.StatusUnauthorized {
		t.Errorf("the notification replayed with its nonce: status %d, want 401", got)
	}
	if got := send("/channels/WECHAT/notify"); got != http.StatusUnauthorized {
		t.Errorf("ALIPAY's notification sent to WECHAT's path: status %d, want 401", got)
	}
	if n := rec.count(); n != 1 {
		t.Errorf("the resolver was told %d times, want once", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if refused["ALIPAY/replayed"] != 1 || refused["WECHAT/signature"] != 1 || len(refused) != 2 {
		t.Errorf("refusals counted %v, want ALIPAY/replayed and WECHAT/signature once each", refused)
	}
}
