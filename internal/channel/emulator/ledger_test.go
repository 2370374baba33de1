package emulator

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"payserver/internal/channel/gateway"
)

// Closing and reopening the file keeps the books and the idempotency
// memory: outcomes, closed orders, the sequence.
func TestLedgerSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	h := newHarness(t, harnessOptions{path: path})
	paid := h.pay("ALIPAY", "o-paid", 100)
	h.mustAdmin("ALIPAY", `{"declineRate":1}`)
	h.pay("ALIPAY", "o-declined", 100)
	h.closeOrder("ALIPAY", "o-closed")
	before := h.ledger(-1)
	h.close()

	h2 := newHarness(t, harnessOptions{path: path})
	if r := h2.pay("ALIPAY", "o-paid", 100); r.answer != paid.answer {
		t.Errorf("replay after reopen %+v, want %+v", r.answer, paid.answer)
	}
	if r := h2.pay("ALIPAY", "o-declined", 100); r.answer.Outcome != gateway.Declined {
		t.Errorf("declined order after reopen: %+v, want DECLINED", r.answer)
	}
	if r := h2.pay("ALIPAY", "o-closed", 100); r.answer.Code != "ORDER_CLOSED" {
		t.Errorf("closed order after reopen: %+v, want DECLINED ORDER_CLOSED", r.answer)
	}
	after := h2.ledger(-1)
	if len(after) != len(before)+3 {
		t.Fatalf("%d lines after reopen, want %d", len(after), len(before)+3)
	}
	for i, l := range before {
		if after[i] != l {
			t.Errorf("line %d changed across reopen: %+v, then %+v", i, l, after[i])
		}
	}
	for i, l := range after[len(before):] {
		if l.Seq != before[len(before)-1].Seq+int64(i)+1 || l.MoneyMoved {
			t.Errorf("new line %+v: want seq continuing, no money moved", l)
		}
	}
}

func TestLedgerSince(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.pay("ALIPAY", "o-1", 1)
	time.Sleep(2 * time.Millisecond)
	mark := time.Now().UnixMicro()
	h.pay("ALIPAY", "o-2", 1)
	h.query("WECHAT", "o-2")
	all := h.ledger(-1)
	if len(all) != 3 {
		t.Fatalf("%d lines, want 3", len(all))
	}
	since := h.ledger(mark)
	if len(since) != 2 || since[0].OrderNo != "o-2" || since[1].Op != OpQuery {
		t.Errorf("since %d: %+v, want the last two lines", mark, since)
	}
	if exact := h.ledger(all[1].ReceivedAtUs); len(exact) != 2 {
		t.Errorf("since = a line's receive time: %d lines, want it included (2)", len(exact))
	}
	if none := h.ledger(time.Now().Add(time.Hour).UnixMicro()); len(none) != 0 {
		t.Errorf("since the future: %+v, want nothing", none)
	}
}

// Lines are read in pages; the order and the count hold across pages.
func TestLedgerPages(t *testing.T) {
	store, err := OpenStore(context.Background(), filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	n := ledgerPage*2 + 7
	ctx := context.Background()
	for i := range n {
		// Receive times out of write order, some equal: receive order wins, then seq.
		l := Line{Op: OpQuery, Channel: "A", OrderNo: "o", ReceivedAtUs: int64(n-i) / 3, Outcome: gateway.NotFound}
		if _, err := store.Append(ctx, l, nil); err != nil {
			t.Fatal(err)
		}
	}
	var got []Line
	if err := store.Lines(ctx, 0, func(l Line) error { got = append(got, l); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d lines, want %d", len(got), n)
	}
	for i := 1; i < len(got); i++ {
		a, b := got[i-1], got[i]
		if a.ReceivedAtUs > b.ReceivedAtUs || (a.ReceivedAtUs == b.ReceivedAtUs && a.Seq >= b.Seq) {
			t.Fatalf("lines %d and %d out of order: %+v, %+v", i-1, i, a, b)
		}
	}
}
