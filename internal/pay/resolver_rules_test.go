package pay_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"payserver/internal/channel"
	"payserver/internal/channel/emulator"
	"payserver/internal/channel/gateway"
	"payserver/internal/pay"
)

// alipayEmulator serves the emulator's ALIPAY, behaving as behaviour, over
// real HTTP, and returns its ledger, its server and payserver's Channel to
// it (callTimeout 0: the default); all are closed at the test's end.
func alipayEmulator(t *testing.T, callTimeout time.Duration, behaviour string) (*emulator.Store, *httptest.Server, *gateway.Channel) {
	t.Helper()
	secret := []byte("resolver-rules-test-secret-0123456789ab")
	store, err := emulator.OpenStore(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	patch, err := emulator.ParseChannelPatch("ALIPAY=" + behaviour)
	if err != nil {
		t.Fatal(err)
	}
	em, err := emulator.New(emulator.Config{Channels: []string{"ALIPAY"}, Secret: secret, Store: store, Patches: []emulator.ChannelPatch{patch}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(em)
	gw, err := gateway.NewChannel(gateway.Config{Code: "ALIPAY", BaseURL: srv.URL + "/ALIPAY", CallTimeout: callTimeout,
		Keys: gateway.Keys{{ID: emulator.DefaultKeyID, Secret: secret}}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		gw.CloseIdle()
		_ = em.Close()
		srv.CloseClientConnections()
		srv.Close()
		_ = store.Close()
	})
	return store, srv, gw
}

// TestACloseBeforeCloseAfterWaits: the emulator refuses a close within
// 1.5 s of the order's first pay (closeAfterMs). The resolver, told the
// channel's closeAfter, queries (NOT_FOUND), does not close yet, and
// closes once the time has passed: the emulator never refuses a close.
func TestACloseBeforeCloseAfterWaits(t *testing.T) {
	const closeAfter = 1500 * time.Millisecond
	const callTimeout = 500 * time.Millisecond
	r := newResolverRig(t, resolverLimits)
	store, srv, gw := alipayEmulator(t, callTimeout, `{"closeAfterMs":1500,"closeTooSoonCode":"ORDER_TOO_RECENT","dropRate":1,"holdMs":0}`)

	o := r.unknownOrder("early", 100, false)
	if _, err := gw.Pay(context.Background(), channel.Request{OrderNo: o.OrderNo, RequestID: o.RequestID, MerchantID: "m", Amount: 100, Currency: "CNY"}); err == nil {
		t.Fatal("the dropped pay was answered")
	}
	resp, err := http.Post(srv.URL+"/admin/channels/ALIPAY", "application/json", strings.NewReader(`{"dropRate":0}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	reg, err := channel.NewRegistry(gw)
	if err != nil {
		t.Fatal(err)
	}
	res, err := pay.NewResolver(r.orders, r.lim, reg, pay.ResolverOptions{Owner: "a", Backoff: 10 * time.Millisecond,
		MaxBackoff: 10 * time.Millisecond, CallTimeout: callTimeout,
		Rules: func(code string) pay.UnknownRules {
			if code == "ALIPAY" {
				return pay.UnknownRules{CloseAfter: closeAfter}
			}
			return pay.UnknownRules{}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.ResolveOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.get("early"); got.Status != pay.StatusUnknown {
		t.Fatalf("right after the query: %s, want still UNKNOWN (waiting for closeAfter)", got.Status)
	}
	deadline := time.Now().Add(closeAfter + callTimeout + 5*time.Second)
	for r.get("early").Status == pay.StatusUnknown && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if err := res.ResolveOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.get("early"); got.Status != pay.StatusFailed || got.FailureCode != pay.FailureNotSent || got.ResolvedBy != pay.ResolvedByClose {
		t.Fatalf("%s %s by %s, want FAILED NOT_SENT by close", got.Status, got.FailureCode, got.ResolvedBy)
	}
	var firstPay time.Time
	var closes []emulator.Line
	err = store.Lines(context.Background(), 0, func(l emulator.Line) error {
		switch {
		case l.Op == emulator.OpPay && firstPay.IsZero():
			firstPay = time.UnixMicro(l.ReceivedAtUs)
		case l.Op == emulator.OpClose:
			closes = append(closes, l)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(closes) != 1 || closes[0].Outcome != gateway.Closed {
		t.Fatalf("close lines %+v, want one CLOSED (none refused)", closes)
	}
	if at := time.UnixMicro(closes[0].ReceivedAtUs); at.Sub(firstPay) < closeAfter {
		t.Errorf("closed %v after the pay, want at least %v", at.Sub(firstPay), closeAfter)
	}
}

// TestNoQueryBeforeQueryAfter: with a channel's queryAfter of 1 s the
// resolver does not ask the emulator sooner, then resolves the order by
// query; the emulator saw no query before that time.
func TestNoQueryBeforeQueryAfter(t *testing.T) {
	const queryAfter = time.Second
	r := newResolverRig(t, resolverLimits)
	store, _, gw := alipayEmulator(t, 0, `{}`)
	o := r.unknownOrder("later", 100, false)
	if _, err := gw.Pay(context.Background(), channel.Request{OrderNo: o.OrderNo, RequestID: o.RequestID, MerchantID: "m", Amount: 100, Currency: "CNY"}); err != nil {
		t.Fatal(err)
	}
	reg, err := channel.NewRegistry(gw)
	if err != nil {
		t.Fatal(err)
	}
	res, err := pay.NewResolver(r.orders, r.lim, reg, pay.ResolverOptions{Owner: "a", Backoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond,
		Rules: func(string) pay.UnknownRules { return pay.UnknownRules{QueryAfter: queryAfter} }})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(queryAfter + 5*time.Second)
	for r.get("later").Status == pay.StatusUnknown && time.Now().Before(deadline) {
		if err := res.ResolveOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := r.get("later"); got.Status != pay.StatusSucceeded || got.ResolvedBy != pay.ResolvedByQuery {
		t.Fatalf("%s by %s, want SUCCEEDED by query", got.Status, got.ResolvedBy)
	}
	var queries []time.Time
	_ = store.Lines(context.Background(), 0, func(l emulator.Line) error {
		if l.Op == emulator.OpQuery {
			queries = append(queries, time.UnixMicro(l.ReceivedAtUs))
		}
		return nil
	})
	if len(queries) != 1 || queries[0].Sub(o.CreatedAt) < queryAfter {
		t.Errorf("queries at %v after the order's creation, want one, at least %v after", sinceAll(queries, o.CreatedAt), queryAfter)
	}
}

func sinceAll(ts []time.Time, from time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(from)
	}
	return out
}

// TestQueriesEveryQueryEvery: while the emulator answers PROCESSING, the
// resolver asks again no sooner than the channel's queryEvery (not its
// own 10 ms backoff).
func TestQueriesEveryQueryEvery(t *testing.T) {
	const every = 300 * time.Millisecond
	r := newResolverRig(t, resolverLimits)
	store, _, gw := alipayEmulator(t, 0, `{"processingRate":1,"processingMs":60000}`)
	o := r.unknownOrder("slow", 100, false)
	if res, err := gw.Pay(context.Background(), channel.Request{OrderNo: o.OrderNo, RequestID: o.RequestID, MerchantID: "m", Amount: 100, Currency: "CNY"}); err != nil || res.Status != channel.Processing {
		t.Fatalf("pay: %+v %v, want PROCESSING", res, err)
	}
	reg, err := channel.NewRegistry(gw)
	if err != nil {
		t.Fatal(err)
	}
	res, err := pay.NewResolver(r.orders, r.lim, reg, pay.ResolverOptions{Owner: "a", Backoff: 10 * time.Millisecond, MaxBackoff: every,
		Rules: func(string) pay.UnknownRules { return pay.UnknownRules{QueryEvery: every} }})
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(1100 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if err := res.ResolveOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var queries []time.Time
	_ = store.Lines(context.Background(), 0, func(l emulator.Line) error {
		if l.Op == emulator.OpQuery {
			queries = append(queries, time.UnixMicro(l.ReceivedAtUs))
		}
		return nil
	})
	if len(queries) < 2 || len(queries) > 5 {
		t.Fatalf("%d queries in 1.1 s, want 2 to 5 (one every %v)", len(queries), every)
	}
	for i := 1; i < len(queries); i++ {
		if gap := queries[i].Sub(queries[i-1]); gap < every-10*time.Millisecond {
			t.Errorf("queries %v apart, want at least %v", gap, every)
		}
	}
}
