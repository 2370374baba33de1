package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/channel"
	"payserver/internal/channel/emulator"
	"payserver/internal/channel/gateway"
)

// accepted counts the ledger's lines of orderNo on code that were not
// refused.
func (e *emu) accepted(code, orderNo string) int {
	e.t.Helper()
	n := 0
	for _, l := range e.ledger() {
		if l.Channel == code && l.OrderNo == orderNo && l.Outcome != emulator.OutcomeError {
			n++
		}
	}
	return n
}

// TestSignedForAnotherChannel: a request signed for ALIPAY sent to
// WECHAT's path is refused (401), though both channels share the key.
func TestSignedForAnotherChannel(t *testing.T) {
	e := newEmu(t)
	if _, err := e.channel("ALIPAY").Query(context.Background(), order("PS-A")); !errors.Is(err, channel.ErrNotFound) {
		t.Fatalf("query: %v", err)
	}
	req, _ := e.last("/ALIPAY/query")
	if got := e.send(req, "/WECHAT/query"); got != http.StatusUnauthorized {
		t.Fatalf("ALIPAY's query sent to WECHAT: status %d, want 401", got)
	}
	if n := e.accepted("WECHAT", "PS-A"); n != 0 {
		t.Errorf("WECHAT took %d calls of PS-A, want 0", n)
	}
}

// TestQueryReplayedAsClose: a signed query's body and headers sent to
// /close are refused; the order is not closed, and a pay of it still goes
// through.
func TestQueryReplayedAsClose(t *testing.T) {
	e := newEmu(t)
	ch := e.channel("ALIPAY")
	if _, err := ch.Query(context.Background(), order("PS-Q")); !errors.Is(err, channel.ErrNotFound) {
		t.Fatalf("query: %v", err)
	}
	req, _ := e.last("/ALIPAY/query")
	if got := e.send(req, "/ALIPAY/close"); got != http.StatusUnauthorized {
		t.Fatalf("a query replayed as a close: status %d, want 401", got)
	}
	if closes := e.lines(emulator.OpClose, "PS-Q"); len(closes) != 1 || closes[0].Outcome != emulator.OutcomeError {
		t.Errorf("close lines %+v, want one refusal", closes)
	}
	if res, err := ch.Pay(context.Background(), order("PS-Q")); err != nil || res.Status != channel.Succeeded {
		t.Fatalf("pay after the refused close: %+v %v, want SUCCEEDED (the order was never closed)", res, err)
	}
}

// TestAnswerReplayedAsRequest: the emulator's signed answer to a query,
// sent back to it as a request on the same path, is refused: an answer's
// signature covers "answer\n" too.
func TestAnswerReplayedAsRequest(t *testing.T) {
	e := newEmu(t)
	if _, err := e.channel("ALIPAY").Query(context.Background(), order("PS-R")); !errors.Is(err, channel.ErrNotFound) {
		t.Fatalf("query: %v", err)
	}
	_, answer := e.last("/ALIPAY/query")
	if answer.header.Get(gateway.HeaderSignature) == "" {
		t.Fatal("the answer is not signed")
	}
	for _, path := range []string{"/ALIPAY/query", "/ALIPAY/close"} {
		if got := e.send(answer, path); got != http.StatusUnauthorized {
			t.Errorf("an answer sent as a request to %s: status %d, want 401", path, got)
		}
	}
	if n := e.accepted("ALIPAY", "PS-R"); n != 1 {
		t.Errorf("ALIPAY took %d calls of PS-R, want 1 (the query)", n)
	}
}

// TestRequestReplayedWithItsNonce: a request sent again as it was (its
// nonce, timestamp and signature) within the window is refused as
// replayed, and processes nothing more.
func TestRequestReplayedWithItsNonce(t *testing.T) {
	e := newEmu(t)
	ch := e.channel("ALIPAY")
	if _, err := ch.Close(context.Background(), order("PS-N")); err != nil {
		t.Fatalf("close: %v", err)
	}
	req, _ := e.last("/ALIPAY/close")
	if got := e.send(req, "/ALIPAY/close"); got != http.StatusUnauthorized {
		t.Fatalf("a close replayed with its nonce: status %d, want 401", got)
	}
	closes := e.lines(emulator.OpClose, "PS-N")
	if len(closes) != 2 || closes[1].Outcome != emulator.OutcomeError || closes[1].Code != "BAD_SIGNATURE" {
		t.Errorf("close lines %+v, want the close, then the refused replay", closes)
	}
}

// TestRemovedKey: once the emulator dropped a key, a request under it is
// refused (401, not processed: ErrNotSent), and an answer under a key
// payserver dropped is refused and counted as unknown_key.
func TestRemovedKey(t *testing.T) {
	e := newEmu(t)
	oldKey := gateway.Key{ID: "k-old", Secret: []byte("old-secret-0123456789abcdefghijklmnop")}
	newKey := gateway.Key{ID: "k-new", Secret: []byte("new-secret-0123456789abcdefghijklmnop")}
	if err := e.em.SetKeys("ALIPAY", gateway.Keys{newKey}); err != nil {
		t.Fatal(err)
	}
	_, err := e.channelWith("ALIPAY", gateway.Keys{oldKey}, nil).Pay(context.Background(), order("PS-K1"))
	if !errors.Is(err, channel.ErrNotSent) {
		t.Fatalf("pay under a removed key: %v, want ErrNotSent (refused, 401)", err)
	}
	if n := e.accepted("ALIPAY", "PS-K1"); n != 0 {
		t.Errorf("ALIPAY took %d calls of PS-K1, want 0", n)
	}

	var refused []gateway.Reason
	var mu sync.Mutex
	count := func(r gateway.Reason) { mu.Lock(); refused = append(refused, r); mu.Unlock() }
	// payserver signs with the new key but no longer knows the one the
	// emulator answers with.
	if err := e.em.SetKeys("ALIPAY", gateway.Keys{oldKey, newKey}); err != nil {
		t.Fatal(err)
	}
	_, err = e.channelWith("ALIPAY", gateway.Keys{newKey}, count).Pay(context.Background(), order("PS-K2"))
	if err == nil || errors.Is(err, channel.ErrNotSent) || !errors.Is(err, gateway.ErrBadSignature) {
		t.Fatalf("an answer under a removed key: %v, want an unknown outcome (bad signature)", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refused) != 1 || refused[0] != gateway.ReasonUnknownKey {
		t.Errorf("refused answers counted %v, want [unknown_key]", refused)
	}
}

// TestRotationWhilePaymentsFlow: a key rolled in the three documented
// steps (add the new key second, move it first, remove the old one), each
// done on the emulator and on payserver's side before the next, while
// payments flow: not one message is refused.
func TestRotationWhilePaymentsFlow(t *testing.T) {
	e := newEmu(t)
	oldKey := gateway.Key{ID: "2025-q4", Secret: []byte("old-secret-0123456789abcdefghijklmnop")}
	newKey := gateway.Key{ID: "2026-q1", Secret: []byte("new-secret-0123456789abcdefghijklmnop")}
	if err := e.em.SetKeys("ALIPAY", gateway.Keys{oldKey}); err != nil {
		t.Fatal(err)
	}
	var refusedAnswers atomic.Int64
	count := func(gateway.Reason) { refusedAnswers.Add(1) }
	var current atomic.Pointer[gateway.Channel]
	current.Store(e.channelWith("ALIPAY", gateway.Keys{oldKey}, count))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var paid atomic.Int64
	errs := make(chan error, 100)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				res, err := current.Load().Pay(context.Background(), order(fmt.Sprintf("PS-ROT-%d-%d", w, i)))
				if err != nil || res.Status != channel.Succeeded {
					errs <- err
					return
				}
				paid.Add(1)
			}
		}()
	}
	flow := func() {
		// Let some payments go through under the current keys.
		start := paid.Load()
		deadline := time.Now().Add(5 * time.Second)
		for paid.Load() < start+20 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	steps := []struct {
		name      string
		emulator  gateway.Keys
		payserver gateway.Keys
	}{
		{"add the new key second", gateway.Keys{oldKey, newKey}, gateway.Keys{oldKey, newKey}},
		{"move it first", gateway.Keys{newKey, oldKey}, gateway.Keys{newKey, oldKey}},
		{"remove the old one", gateway.Keys{newKey}, gateway.Keys{newKey}},
	}
	flow()
	for _, s := range steps {
		// Either side may go first within a step.
		if err := e.em.SetKeys("ALIPAY", s.emulator); err != nil {
			t.Fatal(err)
		}
		flow()
		current.Store(e.channelWith("ALIPAY", s.payserver, count))
		flow()
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a payment failed during the rotation: %v", err)
	}
	if n := refusedAnswers.Load(); n != 0 {
		t.Errorf("payserver refused %d answers during the rotation", n)
	}
	for _, l := range e.ledger() {
		if l.Outcome == emulator.OutcomeError {
			t.Errorf("the emulator refused a call during the rotation: %+v", l)
		}
	}
	if paid.Load() < 100 {
		t.Errorf("only %d payments went through the rotation", paid.Load())
	}
}
