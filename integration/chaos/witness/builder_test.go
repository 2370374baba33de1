package witness

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// t0 is 2026-03-01T00:00:00Z in Unix µs: hand-built histories start there.
const t0 = int64(1772323200) * 1e6

const (
	ms  = int64(1e3)
	sec = int64(1e6)
)

// builder writes hand-built histories the way a campaign would record them.
type builder struct {
	tb  testing.TB
	h   History
	seq int64
}

func newHistory(tb testing.TB, doc string) *builder {
	tb.Helper()
	b := &builder{tb: tb}
	b.h.Config = Config{Instances: 3, Policy: "local", QuietFromUs: t0 + 3600*sec, DumpedAtUs: t0 + 26*3600*sec} // the dump the next day: only a test about the members sets it inside a window
	b.publish(doc, 0)
	return b
}

// publish puts a document in force from `from`; the one before stays in
// force one second longer (its propagation).
func (b *builder) publish(raw string, from int64) string {
	b.tb.Helper()
	if n := len(b.h.Limits); n > 0 {
		b.h.Limits[n-1].ToUs = from + sec
	}
	v := mustParse(b.tb, raw).Version
	b.h.Limits = append(b.h.Limits, LimitsDoc{Version: v, Raw: raw, FromUs: from})
	return v
}

// versionAt is the version of the latest document published by at.
func (b *builder) versionAt(at int64) string {
	v := ""
	for _, l := range b.h.Limits {
		if l.FromUs <= at {
			v = l.Version
		}
	}
	return v
}

func (b *builder) op(kind, rid, biz, ch string, amount, at int64, status int, body any) *Op {
	b.seq++
	raw, err := json.Marshal(body)
	if err != nil {
		b.tb.Fatal(err)
	}
	b.h.Ops = append(b.h.Ops, Op{Seq: b.seq, Client: "c1", Instance: "ps1", Kind: kind, RequestID: rid, BizType: biz, Channel: ch,
		Amount: amount, Currency: "CNY", InvokeUs: at - 2*ms, CompleteUs: at + 3*ms, Status: status, Body: raw})
	return &b.h.Ops[len(b.h.Ops)-1]
}

func (b *builder) order(rid, biz, ch string, amount, at int64, status, code string) *Order {
	b.h.Orders = append(b.h.Orders, Order{OrderNo: "PS" + rid, RequestID: rid, BizType: biz, Channel: ch, Amount: amount, Currency: "CNY",
		Status: status, FailureCode: code, CreatedAtUs: at + ms, UpdatedAtUs: at + 2*ms, AdmittedAtUs: at,
		AdmittedKeys: fmt.Sprintf("payserver:rl:{%s}:%s:1000", ch, biz), LimitsVersion: b.versionAt(at)})
	return &b.h.Orders[len(b.h.Orders)-1]
}

func (b *builder) ledger(rid, ch string, amount, at int64, outcome string, moved bool) *LedgerEntry {
	e := LedgerEntry{Seq: int64(len(b.h.Ledger) + 1), Op: "pay", Channel: ch, OrderNo: "PS" + rid, RequestID: rid, Amount: amount,
		Currency: "CNY", ReceivedAtUs: at + ms, Outcome: outcome, MoneyMoved: moved}
	if moved {
		e.TradeNo = "EMU-" + rid
	}
	b.h.Ledger = append(b.h.Ledger, e)
	return &b.h.Ledger[len(b.h.Ledger)-1]
}

// paid is a payment admitted at `at` (Redis µs) that succeeded.
func (b *builder) paid(rid, biz, ch string, amount, at int64) {
	o := b.order(rid, biz, ch, amount, at, "SUCCEEDED", "")
	o.ChannelTradeNo = "EMU-" + rid
	b.ledger(rid, ch, amount, at, "SUCCEEDED", true)
	b.op("pay", rid, biz, ch, amount, at, 200, map[string]any{"orderNo": o.OrderNo, "requestId": rid, "amount": amount, "currency": "CNY", "status": "SUCCEEDED"})
}

// declined is a payment admitted at `at` that the channel declined: its
// amount is given back, its count stays.
func (b *builder) declined(rid, biz, ch string, amount, at int64) {
	o := b.order(rid, biz, ch, amount, at, "FAILED", "INSUFFICIENT_FUNDS")
	e := b.ledger(rid, ch, amount, at, "DECLINED", false)
	e.Code = "INSUFFICIENT_FUNDS"
	b.op("pay", rid, biz, ch, amount, at, 200, map[string]any{"orderNo": o.OrderNo, "requestId": rid, "amount": amount, "currency": "CNY",
		"status": "FAILED", "failureCode": "INSUFFICIENT_FUNDS"})
}

// throttled is a pinned payment the channel answered THROTTLED: FAILED
// NOT_SENT, its slot released, 429 channelThrottled to the client.
func (b *builder) throttled(rid, biz, ch string, amount, at int64) {
	b.order(rid, biz, ch, amount, at, "FAILED", "NOT_SENT")
	b.ledger(rid, ch, amount, at, "THROTTLED", false)
	b.op("pay", rid, biz, ch, amount, at, 429, limited(map[string]any{"reason": "channelThrottled", "bizType": biz, "channel": ch, "orderNo": "PS" + rid}))
}

// refused is a 429 REQUEST_LIMITED answered at `at`.
func (b *builder) refused(rid, biz, ch string, amount, at int64) *Op {
	return b.op("pay", rid, biz, ch, amount, at, 429, limited(map[string]any{"bizType": biz, "channel": ch, "used": 0}))
}

// acquired is a /v1/limits acquisition admitted at `at`.
func (b *builder) acquired(rid, biz, ch string, at int64) *Op {
	op := b.op("acquire", rid, biz, ch, 0, at, 200, map[string]any{"allowed": true, "duplicate": false})
	op.Amount, op.Currency, op.AdmittedAtUs = 0, "", at
	return op
}

func (b *builder) member(key, member string, score int64) {
	b.h.Members = append(b.h.Members, Member{Key: key, Member: member, ScoreUs: score})
}

func (b *builder) fault(kind string, from, to, lost int64) {
	b.h.Faults = append(b.h.Faults, Fault{Kind: kind, FromUs: from, ToUs: to, LostWrites: lost})
}

func limited(details map[string]any) map[string]any {
	return map[string]any{"code": "REQUEST_LIMITED", "message": "limited", "details": details}
}

func (b *builder) check() Report { return Check(b.h, Options{}) }

// wantViolations fails unless the report holds exactly these properties
// (as a multiset), and shows the report when it does not.
func wantViolations(tb testing.TB, r Report, want ...Property) {
	tb.Helper()
	var got []string
	for _, v := range r.Violations {
		got = append(got, string(v.Property))
	}
	var w []string
	for _, p := range want {
		w = append(w, string(p))
	}
	sort.Strings(got)
	sort.Strings(w)
	if strings.Join(got, ",") != strings.Join(w, ",") {
		var b strings.Builder
		for _, v := range r.Violations {
			b.WriteString(v.String() + "\n")
		}
		tb.Fatalf("violations = [%s], want [%s]\n%s", strings.Join(got, ","), strings.Join(w, ","), b.String())
	}
}
