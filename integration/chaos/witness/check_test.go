package witness

import (
	"bytes"
	"strings"
	"testing"
)

const baseDoc = `
window: 1s
zone: UTC
routes: {ONLINE_PAY: [ALIPAY, WECHAT]}
limits:
  ONLINE_PAY:ALIPAY:
    - {limit: 3, window: 1s}
    - {amount: 10000, window: 1m, currency: CNY}
    - {limit: 100, calendar: day}
  ONLINE_PAY:WECHAT: -1
  "*:UNIONPAY":
    - {limit: 5, window: 1s, reserve: {REFUND: 2}}
  REFUND:ALIPAY: 2
`

const (
	alipayDay = "payserver:rl:{ALIPAY}:ONLINE_PAY:day.0000.UTC"
	alipay1s  = "payserver:rl:{ALIPAY}:ONLINE_PAY:1000"
	alipayAm  = "payserver:rl:{ALIPAY}:ONLINE_PAY:a60000.CNY"
)

// heldInTheMinute adds the members cleanHistory's money window still holds
// during its first minute: p1..p5 with their amounts (d1's was given back).
func heldInTheMinute(b *builder) {
	for _, o := range b.h.Orders {
		if o.Channel == "ALIPAY" && o.Status == "SUCCEEDED" && o.AdmittedAtUs < t0+60*sec {
			b.h.Members = append(b.h.Members, Member{Key: alipayAm, Member: o.RequestID, ScoreUs: o.AdmittedAtUs, Amount: o.Amount})
		}
	}
}

// cleanHistory keeps every promise, close to each edge: full windows,
// a refusal by a full window, a member leaving at exactly t+1s, an amount
// given back by a decline, a throttled payment, reservations used to the
// last slot, an acquisition, a Redis fault with its 503.
func cleanHistory(tb testing.TB) *builder {
	b := newHistory(tb, baseDoc)
	for i, at := range []int64{100 * ms, 200 * ms, 300 * ms} {
		b.paid("p"+string(rune('1'+i)), "ONLINE_PAY", "ALIPAY", 1000, t0+at)
	}
	b.refused("r1", "ONLINE_PAY", "ALIPAY", 1000, t0+400*ms)
	b.paid("p4", "ONLINE_PAY", "ALIPAY", 1000, t0+1100*ms) // p1 left at exactly 1100ms
	b.declined("d1", "ONLINE_PAY", "ALIPAY", 5000, t0+2*sec)
	b.paid("p5", "ONLINE_PAY", "ALIPAY", 6000, t0+4*sec)       // 4000 + 6000: fits only because d1 gave 5000 back
	b.throttled("t1", "ONLINE_PAY", "ALIPAY", 1000, t0+70*sec) // after the minute of p1..p5
	b.paid("w1", "ONLINE_PAY", "WECHAT", 99999, t0+5*sec)
	for i := range 3 {
		b.paid("u"+string(rune('1'+i)), "ONLINE_PAY", "UNIONPAY", 10, t0+10*sec+int64(i)*ms)
	}
	b.refused("u4", "ONLINE_PAY", "UNIONPAY", 10, t0+10*sec+5*ms) // 3 + REFUND's 2 kept
	b.paid("rf1", "REFUND", "UNIONPAY", 10, t0+10*sec+10*ms)
	b.paid("rf2", "REFUND", "UNIONPAY", 10, t0+10*sec+11*ms)
	b.acquired("a1", "REFUND", "ALIPAY", t0+20*sec)
	b.fault("redis", t0+30*sec, t0+31*sec, 0)
	b.op("pay", "x1", "ONLINE_PAY", "ALIPAY", 1000, t0+30*sec+500*ms, 503, map[string]any{"code": "DEPENDENCY_UNAVAILABLE"})
	for _, rid := range []string{"p1", "p2", "p3", "p4", "d1", "p5"} {
		b.member(alipayDay, rid, 0)
	}
	return b
}

func TestCleanHistoryPasses(t *testing.T) {
	b := cleanHistory(t)
	r := b.check()
	wantViolations(t, r)
	if got, want := r.Summary(), "17 operations, 1 faults, 0 violations"; got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	b := cleanHistory(t)
	var buf bytes.Buffer
	if err := WriteHistory(&buf, b.h); err != nil {
		t.Fatal(err)
	}
	h, err := ReadHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	wantViolations(t, Check(h, Options{}))
	if len(h.Ops) != len(b.h.Ops) || len(h.Members) != len(b.h.Members) || h.Config != b.h.Config {
		t.Errorf("round trip lost records: %d ops, %d members, %+v", len(h.Ops), len(h.Members), h.Config)
	}
	if _, err := ReadHistory(strings.NewReader(`{"op":{"kind":"pay"},"order":{}}` + "\n")); err == nil {
		t.Error("ReadHistory accepted a line with two records")
	}
	if _, err := ReadHistory(strings.NewReader(`{"opp":{}}` + "\n")); err == nil {
		t.Error("ReadHistory accepted an unknown record")
	}
}

// A fourth admission in the 1s window: caught one microsecond before the
// first admission leaves, not at the instant it leaves.
func TestOneAdmissionTooManyInOneSecond(t *testing.T) {
	for _, tt := range []struct {
		name string
		at   int64
		want []Property
	}{
		{"as the first leaves", t0 + 1100*ms, nil},
		{"one µs before", t0 + 1100*ms - 1, []Property{WithinLimits}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newHistory(t, baseDoc)
			for i, at := range []int64{100 * ms, 200 * ms, 300 * ms, tt.at - t0} {
				b.paid("p"+string(rune('1'+i)), "ONLINE_PAY", "ALIPAY", 10, t0+at)
			}
			r := b.check()
			wantViolations(t, r, tt.want...)
			if len(tt.want) > 0 {
				v := r.Violations[0]
				if v.Key != "ONLINE_PAY:ALIPAY" || v.Window != "count/1s" || v.RequestID != "p4" || len(v.Excerpt) < 2 {
					t.Errorf("violation = %s, want it to name ONLINE_PAY:ALIPAY count/1s and p4 with its window", v)
				}
			}
		})
	}
}

func TestAmountCapNeedsTheGiveBack(t *testing.T) {
	b := newHistory(t, baseDoc)
	b.paid("p1", "ONLINE_PAY", "ALIPAY", 4000, t0)
	b.paid("p2", "ONLINE_PAY", "ALIPAY", 5000, t0+2*sec) // a SUCCEEDED one keeps its amount
	b.paid("p3", "ONLINE_PAY", "ALIPAY", 2000, t0+4*sec)
	wantViolations(t, b.check(), WithinLimits)
}

func TestOrphanSlots(t *testing.T) {
	tests := []struct {
		name   string
		key    string
		member string
	}{
		{"a member with no order", alipayDay, "ghost-1"},
		{"a NOT_SENT order's member", alipayDay, "t1"},
		{"a declined order in an amount window", "payserver:rl:{ALIPAY}:ONLINE_PAY:a60000.CNY", "d1"},
		{"a released acquisition", "payserver:rl:{ALIPAY}:REFUND:1000", "#api:chaos:a2"},
		{"an order of another bizType", alipayDay, "rf1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := cleanHistory(t)
			b.h.Config.DumpedAtUs = t0 + 4*sec + 500*ms // the amount window still holds d1
			heldInTheMinute(b)
			b.member(alipay1s, "p5", t0+4*sec)
			b.acquired("a2", "REFUND", "ALIPAY", t0+4*sec)
			b.op("release", "a2", "REFUND", "ALIPAY", 0, t0+4*sec+100*ms, 200, map[string]any{"released": true})
			b.member(tt.key, tt.member, 0)
			r := b.check()
			wantViolations(t, r, NoOrphanSlot)
			if v := r.Violations[0]; v.RequestID != tt.member || v.Key != tt.key {
				t.Errorf("violation = %s, want it to name %s in %s", v, tt.member, tt.key)
			}
		})
	}
}

func TestOrphanSlotTolerated(t *testing.T) {
	b := cleanHistory(t)
	b.h.Config.DumpedAtUs = t0 + 20*sec
	heldInTheMinute(b)
	b.member(alipay1s, "p1", t0+100*ms) // left its window: trimmed at the next check
	b.member("payserver:rl:{ALIPAY}:REFUND:1000", "#api:chaos:a1", t0+20*sec)
	b.op("pay", "lost-1", "ONLINE_PAY", "ALIPAY", 10, t0+19*sec, 503, map[string]any{"code": "DEPENDENCY_UNAVAILABLE"})
	b.fault("mariadb", t0+19*sec, t0+19*sec+100*ms, 0)
	b.member(alipayDay, "lost-1", 0) // within the lost-answer grace
	// A duplicate of a requestId paid on another channel, whose own check
	// on this one lost its answer: kept through the grace as well.
	b.paid("dup-1", "ONLINE_PAY", "WECHAT", 10, t0+19*sec)
	b.op("pay", "dup-1", "ONLINE_PAY", "ALIPAY", 10, t0+19*sec, 503, map[string]any{"code": "DEPENDENCY_UNAVAILABLE"})
	b.member(alipayDay, "dup-1", 0)
	// Released through the limits API from the windows in force; no
	// document has this one, so it counts the member nowhere.
	b.acquired("a9", "REFUND", "ALIPAY", t0+5*sec)
	b.op("release", "a9", "REFUND", "ALIPAY", 0, t0+6*sec, 200, map[string]any{"released": true})
	b.member("payserver:rl:{ALIPAY}:REFUND:day.0000.UTC", "#api:chaos:a9", 0)
	wantViolations(t, b.check())
}

func TestRequestIDPaidTwice(t *testing.T) {
	b := cleanHistory(t)
	e := b.ledger("p2", "WECHAT", 1000, t0+210*ms, "SUCCEEDED", true)
	e.OrderNo = "PSother"
	r := b.check()
	wantViolations(t, r, SinglePay)
	if v := r.Violations[0]; v.RequestID != "p2" || len(v.Excerpt) != 2 {
		t.Errorf("violation = %s, want p2 with both ledger lines", v)
	}
}

func TestMoneyMovedForAFailedOrder(t *testing.T) {
	b := cleanHistory(t)
	b.h.Ledger[len(b.h.Ledger)-1].MoneyMoved = true // rf2's line, and mark its order FAILED
	for i := range b.h.Orders {
		if b.h.Orders[i].RequestID == "rf2" {
			b.h.Orders[i].Status, b.h.Orders[i].FailureCode = "FAILED", "NOT_SENT"
		}
	}
	r := b.check()
	// The order contradicts its 200 SUCCEEDED answer too.
	wantViolations(t, r, SinglePay, DurableOutcome)
}

func Test2xxWithoutOrder(t *testing.T) {
	b := cleanHistory(t)
	b.op("pay", "nobody", "ONLINE_PAY", "WECHAT", 10, t0+40*sec, 200, map[string]any{"status": "SUCCEEDED"})
	r := b.check()
	wantViolations(t, r, DurableOutcome)
	if v := r.Violations[0]; v.RequestID != "nobody" {
		t.Errorf("violation = %s, want requestId nobody", v)
	}
}

func TestOrderLeftUnknown(t *testing.T) {
	b := cleanHistory(t)
	b.order("u9", "ONLINE_PAY", "WECHAT", 10, t0+50*sec, "UNKNOWN", "CHANNEL_TIMEOUT")
	wantViolations(t, b.check(), DurableOutcome)
}

func TestSucceededWithoutMoney(t *testing.T) {
	b := cleanHistory(t)
	b.h.Ledger = b.h.Ledger[1:] // p1's line is gone
	wantViolations(t, b.check(), DurableOutcome)
}

func TestRefusalWithAnEmptyWindow(t *testing.T) {
	b := cleanHistory(t)
	b.refused("r9", "ONLINE_PAY", "ALIPAY", 10, t0+200*sec) // the amount window was full until p5 left at 64s
	r := b.check()
	wantViolations(t, r, NoFalseRefusal)
	if v := r.Violations[0]; v.RequestID != "r9" || v.Key != "ONLINE_PAY:ALIPAY" {
		t.Errorf("violation = %s, want r9 on ONLINE_PAY:ALIPAY", v)
	}
}

func TestRefusalsJustified(t *testing.T) {
	b := cleanHistory(t)
	b.refused("r8", "ONLINE_PAY", "ALIPAY", 10, t0+1150*ms)        // p2, p3, p4 in (150ms, 1150ms]
	b.refused("r9", "ONLINE_PAY", "ALIPAY", 10, t0+1250*ms+500*ms) // only p3, p4 left, but the near-cache held the refusal up to 1s
	b.refused("big", "ONLINE_PAY", "ALIPAY", 10001, t0+90*sec)     // above the amount cap
	b.refused("r10", "ONLINE_PAY", "ALIPAY", 10, t0+30*sec+800*ms) // during the Redis fault
	wantViolations(t, b.check())
}

func TestFalseRefusalsOfReservations(t *testing.T) {
	b := newHistory(t, baseDoc)
	b.paid("u1", "ONLINE_PAY", "UNIONPAY", 10, t0)
	b.paid("u2", "ONLINE_PAY", "UNIONPAY", 10, t0+ms)
	b.paid("u3", "ONLINE_PAY", "UNIONPAY", 10, t0+2*ms)
	b.refused("u4", "ONLINE_PAY", "UNIONPAY", 10, t0+3*ms) // 3 + REFUND's 2 kept: full for ONLINE_PAY
	b.refused("rf", "REFUND", "UNIONPAY", 10, t0+4*ms)     // REFUND still had its 2
	r := b.check()
	wantViolations(t, r, NoFalseRefusal)
	if v := r.Violations[0]; v.RequestID != "rf" {
		t.Errorf("violation = %s, want rf", v)
	}
}

func TestReservationTakenByOthers(t *testing.T) {
	b := newHistory(t, baseDoc)
	for i := range 4 {
		b.paid("u"+string(rune('1'+i)), "ONLINE_PAY", "UNIONPAY", 10, t0+int64(i)*ms)
	}
	r := b.check()
	wantViolations(t, r, WithinLimits)
	if v := r.Violations[0]; v.Key != "*:UNIONPAY" || v.RequestID != "u4" {
		t.Errorf("violation = %s, want u4 on *:UNIONPAY", v)
	}
}

func Test503WithoutFault(t *testing.T) {
	b := cleanHistory(t)
	b.op("pay", "x2", "ONLINE_PAY", "ALIPAY", 10, t0+60*sec, 503, map[string]any{"code": "DEPENDENCY_UNAVAILABLE"})
	wantViolations(t, b.check(), NoFalseRefusal)
}

func TestThrottledWithoutTheChannelsWord(t *testing.T) {
	b := cleanHistory(t)
	b.op("pay", "t2", "ONLINE_PAY", "WECHAT", 10, t0+60*sec, 429, limited(map[string]any{"reason": "channelThrottled"}))
	wantViolations(t, b.check(), NoFalseRefusal)
}

func TestUnparseableDocumentIsReported(t *testing.T) {
	b := cleanHistory(t)
	b.h.Limits = append(b.h.Limits, LimitsDoc{Raw: "limits: {A:B: [{limit: 1, windw: 1s}]}", FromUs: t0 + 3000*sec})
	wantViolations(t, b.check(), HistoryError)
}

// A window that counts another amount than its order pays is caught: a
// duplicate of a requestId admitted with another amount, whose claim won.
func TestAmountCountedIsTheAmountPaid(t *testing.T) {
	b := cleanHistory(t)
	b.h.Members = append(b.h.Members, Member{Key: alipayDay, Member: "p4", Amount: 1000})
	if r := b.check(); len(r.Violations) != 0 {
		t.Fatalf("the amount paid, counted: %v", r.Violations)
	}
	b.h.Members[len(b.h.Members)-1].Amount = 1500
	wantViolations(t, b.check(), AmountCounted)
}

// A 429 with room in every configured window is justified when the
// channel throttled recently enough that a learned limit may bind (at most
// 1/increase windows: 20 one-second windows by default), and only then.
func TestRefusalByALearnedLimit(t *testing.T) {
	b := cleanHistory(t)
	b.throttled("th", "ONLINE_PAY", "ALIPAY", 10, t0+190*sec)
	b.refused("r9", "ONLINE_PAY", "ALIPAY", 10, t0+200*sec) // 10 s after the throttle: may be learned
	wantViolations(t, b.check())
	b.refused("r10", "ONLINE_PAY", "ALIPAY", 10, t0+240*sec) // 50 s after: no learned limit lasts that long
	wantViolations(t, b.check(), NoFalseRefusal)
}

// A throttle lowers the windows its payment was admitted into: another
// bizType's throttle does not excuse a refusal by a key's own window.
func TestRefusalNotExcusedByAnotherKeysThrottle(t *testing.T) {
	b := cleanHistory(t)
	b.throttled("thr", "REFUND", "ALIPAY", 10, t0+195*sec)
	b.refused("r9", "ONLINE_PAY", "ALIPAY", 10, t0+200*sec)
	wantViolations(t, b.check(), NoFalseRefusal)
}

// TestNearCacheRefusesARetry: the near-cache refuses every check of a key
// whose count window Redis found full, a retry of a member the window
// holds included: a window full counting the member justifies the
// refusal; one that could not have been full does not.
func TestNearCacheRefusesARetry(t *testing.T) {
	b := newHistory(t, baseDoc)
	for i, at := range []int64{100 * ms, 200 * ms, 300 * ms} {
		b.paid("p"+string(rune('1'+i)), "ONLINE_PAY", "ALIPAY", 10, t0+at)
	}
	b.refused("p3", "ONLINE_PAY", "ALIPAY", 10, t0+400*ms)
	wantViolations(t, b.check())
	b.refused("p3", "ONLINE_PAY", "ALIPAY", 10, t0+3500*ms)
	wantViolations(t, b.check(), NoFalseRefusal)
}

// On a loaded host a campaign's first payments can take 80-190 ms, and a
// limiter check can pass its deadline (50 ms, PAYSERVER_LIMITER_TIMEOUT)
// with no fault marked; its retry found the
// window full, so the first call's fate was unknown: 503. A 503 of the
// limiter's store is what a check past its deadline answers
// (docs/PERFORMANCE.md, PAYSERVER_LIMITER_TIMEOUT: "on a loaded host checks
// past it are decided by the policy"), so one that lasted the deadline
// needs no fault; a quicker one, or another dependency's, still does.
func TestLimiter503PastItsDeadlineWithoutFault(t *testing.T) {
	late := map[string]any{"code": "DEPENDENCY_UNAVAILABLE", "message": "the channel limiter did not answer in time for ALIPAY; retry with the same requestId",
		"details": map[string]any{"dependency": "redis"}}
	b := cleanHistory(t)
	op := b.op("pay", "x3", "ONLINE_PAY", "ALIPAY", 10, t0+60*sec, 503, late)
	op.CompleteUs = op.InvokeUs + 72*ms
	wantViolations(t, b.check())

	b = cleanHistory(t)
	b.op("pay", "x4", "ONLINE_PAY", "ALIPAY", 10, t0+60*sec, 503, late) // 5 ms: no deadline passed
	wantViolations(t, b.check(), NoFalseRefusal)

	b = cleanHistory(t)
	op = b.op("pay", "x5", "ONLINE_PAY", "ALIPAY", 10, t0+60*sec, 503, map[string]any{"code": "DEPENDENCY_UNAVAILABLE",
		"details": map[string]any{"dependency": "mariadb"}})
	op.CompleteUs = op.InvokeUs + 72*ms
	wantViolations(t, b.check(), NoFalseRefusal)
}

// TestReleaseLostWithAKilledMaster: Redis replicates asynchronously, so a
// release the master acknowledged can be lost with it like an admission
// (docs/DESIGN.md "Writes lost with a killed master"): a member released
// before a fault that lost writes may be back in its window. The same
// member with the fault before the release, or one that lost nothing, is
// still held by nobody.
func TestReleaseLostWithAKilledMaster(t *testing.T) {
	for _, tt := range []struct {
		name     string
		from, to int64
		lost     int64
		want     []Property
	}{
		{"a fault after the release that lost writes", t0 + 19*sec + 400*ms, t0 + 19*sec + 600*ms, -1, nil},
		{"a fault after the release that lost nothing", t0 + 19*sec + 400*ms, t0 + 19*sec + 600*ms, 0, []Property{NoOrphanSlot}},
		{"a fault that lost writes before the release", t0 + 15*sec, t0 + 15*sec + 200*ms, -1, []Property{NoOrphanSlot}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := cleanHistory(t)
			b.h.Config.DumpedAtUs = t0 + 20*sec
			heldInTheMinute(b)
			b.acquired("a7", "REFUND", "ALIPAY", t0+19*sec+200*ms)
			b.op("release", "a7", "REFUND", "ALIPAY", 0, t0+19*sec+300*ms, 200, map[string]any{"released": true})
			b.member("payserver:rl:{ALIPAY}:REFUND:1000", "#api:chaos:a7", t0+19*sec+200*ms)
			b.fault("redis", tt.from, tt.to, tt.lost)
			wantViolations(t, b.check(), tt.want...)
		})
	}
}
