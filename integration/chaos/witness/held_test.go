package witness

import (
	"fmt"
	"strings"
	"testing"
)

const refund1s = "payserver:rl:{ALIPAY}:REFUND:1000"

// heldHistory is cleanHistory dumped 20 s in, with every member Redis
// must hold then: the money window's and the day's (cleanHistory's), and
// a3's acquisition of a second before.
func heldHistory(tb testing.TB) *builder {
	b := cleanHistory(tb)
	b.h.Config.DumpedAtUs = t0 + 20*sec
	heldInTheMinute(b)
	b.acquired("a3", "REFUND", "ALIPAY", t0+19*sec+500*ms)
	b.member(refund1s, "#api:chaos:a3", t0+19*sec+500*ms)
	return b
}

// dropMember removes a member from the dump, as a lost release or a
// release of the wrong member would.
func dropMember(b *builder, key, member string) {
	kept := b.h.Members[:0]
	for _, m := range b.h.Members {
		if m.Key != key || m.Member != member {
			kept = append(kept, m)
		}
	}
	b.h.Members = kept
}

func TestSlotHeld(t *testing.T) {
	tests := []struct {
		name        string
		change      func(b *builder)
		key, member string // the violation's, when one is wanted
	}{
		{"every kept slot held", func(*builder) {}, "", ""},
		{"a SUCCEEDED order's day slot gone", func(b *builder) { dropMember(b, alipayDay, "p3") }, "ONLINE_PAY:ALIPAY", "p3"},
		{"a SUCCEEDED order's amount gone", func(b *builder) { dropMember(b, alipayAm, "p2") }, "ONLINE_PAY:ALIPAY", "p2"},
		{"a declined call's count gone", func(b *builder) { dropMember(b, alipayDay, "d1") }, "ONLINE_PAY:ALIPAY", "d1"},
		{"an acquisition not released gone", func(b *builder) { dropMember(b, refund1s, "#api:chaos:a3") }, "REFUND:ALIPAY", "#api:chaos:a3"},
		{"an acquisition whose release got no answer", func(b *builder) {
			dropMember(b, refund1s, "#api:chaos:a3")
			b.op("release", "a3", "REFUND", "ALIPAY", 0, t0+19*sec+600*ms, 0, nil).CompleteUs = 0
		}, "", ""},
		{"acquired again, that answer lost: released within a minute", func(b *builder) {
			dropMember(b, refund1s, "#api:chaos:a3")
			b.fault("mariadb", t0+19*sec+500*ms, t0+19*sec+700*ms, 0)
			b.op("acquire", "a3", "REFUND", "ALIPAY", 0, t0+19*sec+600*ms, 503,
				map[string]any{"code": "DEPENDENCY_UNAVAILABLE", "details": map[string]any{"outcome": "unknown"}}).Currency = ""
		}, "", ""},
		{"lost by a Redis restart after it", func(b *builder) {
			dropMember(b, alipayDay, "p3")
			b.fault("redis", t0+15*sec, t0+16*sec, -1)
		}, "", ""},
		{"a Redis outage before it: no lost writes", func(b *builder) {
			dropMember(b, alipayDay, "p3")
			b.fault("redis", t0+15*sec, t0+16*sec, 0)
		}, "ONLINE_PAY:ALIPAY", "p3"},
		{"the window passed", func(b *builder) {
			dropMember(b, refund1s, "#api:chaos:a3")
			b.h.Config.DumpedAtUs = t0 + 20*sec + 600*ms
		}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := heldHistory(t)
			tt.change(b)
			r := b.check()
			if tt.member == "" {
				wantViolations(t, r)
				return
			}
			wantViolations(t, r, SlotHeld)
			if v := r.Violations[0]; v.RequestID != tt.member || v.Key != tt.key || !strings.Contains(v.Message, "Redis holds no member") {
				t.Errorf("violation = %s, want it to name %s in %s", v, tt.member, tt.key)
			}
		})
	}
}

func TestRefusalTookNothing(t *testing.T) {
	tests := []struct {
		name        string
		change      func(b *builder)
		key, member string
		want        []Property
	}{
		{"a refused payment's member", func(b *builder) { b.member(alipayDay, "r1", 0) }, alipayDay, "r1", []Property{RefusalTookNothing}},
		{"a refused acquisition's member", func(b *builder) {
			b.fault("redis", t0+19*sec+400*ms, t0+19*sec+600*ms, 0) // any 429 then is justified
			b.op("acquire", "z1", "REFUND", "ALIPAY", 0, t0+19*sec+500*ms, 429, limited(map[string]any{"bizType": "REFUND", "channel": "ALIPAY"}))
			b.member(refund1s, "#api:chaos:z1", t0+19*sec+500*ms)
		}, refund1s, "#api:chaos:z1", []Property{RefusalTookNothing}},
		{"an acquire answered 503 may own a slot", func(b *builder) {
			b.fault("redis", t0+19*sec+400*ms, t0+19*sec+600*ms, 0)
			b.op("acquire", "z2", "REFUND", "ALIPAY", 0, t0+19*sec+500*ms, 503,
				map[string]any{"code": "DEPENDENCY_UNAVAILABLE", "details": map[string]any{"outcome": "unknown"}})
			b.member(refund1s, "#api:chaos:z2", t0+19*sec+500*ms)
		}, "", "", nil},
		{"refused, then admitted", func(b *builder) {
			b.fault("redis", t0+18*sec, t0+18*sec+100*ms, 0)
			b.op("acquire", "a3", "REFUND", "ALIPAY", 0, t0+18*sec, 429, limited(map[string]any{"bizType": "REFUND", "channel": "ALIPAY"}))
		}, "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := heldHistory(t)
			tt.change(b)
			r := b.check()
			wantViolations(t, r, tt.want...)
			if len(tt.want) > 0 {
				if v := r.Violations[0]; v.RequestID != tt.member || v.Key != tt.key {
					t.Errorf("violation = %s, want it to name %s in %s", v, tt.member, tt.key)
				}
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	for _, tt := range []struct {
		name   string
		amount int64
		want   []Property
	}{
		{"a duplicate at the same amount", 0, nil},
		{"a duplicate at another amount", 150, []Property{Identity}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := heldHistory(t)
			op := b.op("acquire", "a3", "REFUND", "ALIPAY", tt.amount, t0+19*sec+700*ms, 200, map[string]any{"allowed": true, "duplicate": true})
			if tt.amount == 0 {
				op.Currency = ""
			}
			r := b.check()
			wantViolations(t, r, tt.want...)
			if len(tt.want) > 0 {
				if v := r.Violations[0]; v.RequestID != "a3" || len(v.Excerpt) != 2 {
					t.Errorf("violation = %s, want a3 with both acquires", v)
				}
			}
		})
	}
}

func TestOnePayOnTheWire(t *testing.T) {
	for _, tt := range []struct {
		name    string
		channel string
		outcome string
		want    []Property
	}{
		// The gateway is idempotent per orderNo: a repeat of a processed pay
		// processes nothing more, but it went on the wire twice.
		{"the same pay repeated", "ALIPAY", "SUCCEEDED", []Property{OnePayOnTheWire}},
		{"a repeat the channel throttled", "ALIPAY", "THROTTLED", []Property{OnePayOnTheWire}},
		{"a routed payment's other channel", "WECHAT", "THROTTLED", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := cleanHistory(t)
			b.ledger("p2", tt.channel, 1000, t0+200*ms+5*ms, tt.outcome, false)
			r := b.check()
			wantViolations(t, r, tt.want...)
			if len(tt.want) > 0 {
				if v := r.Violations[0]; v.RequestID != "p2" || v.Key != "ALIPAY" || len(v.Excerpt) != 2 {
					t.Errorf("violation = %s, want p2 on ALIPAY with both ledger lines", v)
				}
			}
		})
	}
}

func TestPaths(t *testing.T) {
	b := newHistory(t, baseDoc+`  PLAIN:WECHAT: [{limit: 2, window: 1s}]
  LEARNS:WECHAT: [{limit: 2, window: 1s}]
adaptive:
  "PLAIN:WECHAT": off
`)
	b.paid("q1", "PLAIN", "WECHAT", 10, t0)
	b.refused("q2", "PLAIN", "WECHAT", 10, t0+ms)
	b.paid("q3", "LEARNS", "WECHAT", 10, t0)
	b.paid("q4", "ONLINE_PAY", "ALIPAY", 10, t0)
	b.acquired("q5", "REFUND", "UNIONPAY", t0)
	var got []string
	for _, p := range b.check().Paths {
		got = append(got, p.Path+":"+string(rune('0'+p.Checks))+"/"+string(rune('0'+p.Refused)))
	}
	// ONLINE_PAY:ALIPAY has four windows and learns; REFUND on UNIONPAY
	// meets the channel-wide window, which learns too.
	want := "plain:2/1 several windows:1/0 channel-wide reservations:1/0 calendar:1/0 amount:1/0 learned:3/0"
	if strings.Join(got, " ") != want {
		t.Errorf("Paths = %s, want %s", strings.Join(got, " "), want)
	}
}

// Policy local in a Redis outage: each instance decides in its own
// in-process windows and cannot know what the others admit (docs/DESIGN.md,
// "When Redis fails": "the same windows in process"; "Policy `local` cannot
// be exact across a failover": "an instance that admits in process cannot
// know what the others admit"). Two concurrent acquires of one requestId
// at two amounts on two instances are then both admitted, each held at its
// own amount in its instance's window, and a retry on the first instance at
// the first amount is a duplicate of that instance's slot (say 1450 on
// i0 and 1365 on i1, then 1450 on i0 again).
func TestIdentityAcrossInstancesInAnOutage(t *testing.T) {
	for _, tt := range []struct {
		name    string
		fault   bool
		retryOn string
		policy  string
		want    []Property
	}{
		{"both decided in process, retried where its amount is held", true, "i0", "local", nil},
		{"both decided in process, retried where the other amount is held", true, "i1", "local", []Property{Identity}},
		{"no Redis fault: Redis holds one amount", false, "i0", "local", []Property{Identity}},
		{"policy deny: nothing decided in process", true, "i0", "deny", []Property{Identity}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := heldHistory(t)
			b.h.Config.Policy = tt.policy
			at := t0 + 19*sec + 700*ms
			if tt.fault {
				b.fault("redis", at-500*ms, at+500*ms, 0)
			}
			first := b.op("acquire", "a4", "REFUND", "ALIPAY", 1450, at, 200, map[string]any{"allowed": true, "duplicate": false})
			first.Instance = "i0"
			second := b.op("acquire", "a4", "REFUND", "ALIPAY", 1365, at, 200, map[string]any{"allowed": true, "duplicate": false})
			second.Instance = "i1"
			retry := b.op("acquire", "a4", "REFUND", "ALIPAY", 1450, at+10*ms, 200, map[string]any{"allowed": true, "duplicate": true})
			retry.Instance = tt.retryOn
			got := propertiesOf(b.check(), "a4")
			if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
				t.Errorf("violations of a4 = %v, want %v", got, tt.want)
			}
		})
	}
}

// A limits document reaches the instances one by one: while it does, two
// instances may check a key under two documents. When the key's windows
// differ between them (a calendar's zone or cutoff names another period's
// key), the two check different windows: two concurrent acquires of one
// requestId at two amounts are both admitted, each held at its amount in
// its own document's windows, and a retry at the first amount under the
// first document is a duplicate there. When the windows are the same (only
// a limit changed), one of them holds both, and the retry must be 409.
func TestIdentityAcrossADocumentChange(t *testing.T) {
	doc := func(zone string, limit int) string {
		return strings.Replace(baseDoc, "zone: UTC", "zone: "+zone, 1) + fmt.Sprintf("  CAL:WECHAT: [{limit: %d, calendar: day}]\n", limit)
	}
	for _, tt := range []struct {
		name    string
		next    string // the document published as the acquires are made
		changed bool   // published at the acquires (else an hour before)
		want    []Property
	}{
		{"the day moves to another zone", doc("Asia/Shanghai", 50), true, nil},
		{"only the limit changes", doc("UTC", 60), true, []Property{Identity}},
		{"the change had reached every instance", doc("Asia/Shanghai", 50), false, []Property{Identity}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newHistory(t, doc("UTC", 50))
			at := t0 + 2*3600*sec
			from := at - 200*ms
			if !tt.changed {
				from = at - 3600*sec
			}
			b.publish(tt.next, from)
			first := b.op("acquire", "a5", "CAL", "WECHAT", 1450, at, 200, map[string]any{"allowed": true, "duplicate": false})
			first.Instance = "i0"
			second := b.op("acquire", "a5", "CAL", "WECHAT", 1365, at, 200, map[string]any{"allowed": true, "duplicate": false})
			second.Instance = "i1"
			retry := b.op("acquire", "a5", "CAL", "WECHAT", 1450, at+10*ms, 200, map[string]any{"allowed": true, "duplicate": true})
			retry.Instance = "i0"
			got := propertiesOf(b.check(), "a5")
			if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
				t.Errorf("violations of a5 = %v, want %v", got, tt.want)
			}
		})
	}
}

// After the change has reached every instance, a retry is checked in the
// new document's windows only: a duplicate there at the amount admitted
// under the old document repeats nothing those windows hold.
func TestIdentityAfterADocumentChange(t *testing.T) {
	doc := func(zone string) string {
		return strings.Replace(baseDoc, "zone: UTC", "zone: "+zone, 1) + "  CAL:WECHAT: [{limit: 50, calendar: day}]\n"
	}
	b := newHistory(t, doc("UTC"))
	at := t0 + 2*3600*sec
	b.publish(doc("Asia/Shanghai"), at)
	old := b.op("acquire", "a6", "CAL", "WECHAT", 1450, at-10*sec, 200, map[string]any{"allowed": true, "duplicate": false})
	old.Instance = "i0"
	later := b.op("acquire", "a6", "CAL", "WECHAT", 1365, at+5*sec, 200, map[string]any{"allowed": true, "duplicate": false})
	later.Instance = "i1"
	retry := b.op("acquire", "a6", "CAL", "WECHAT", 1450, at+60*sec, 200, map[string]any{"allowed": true, "duplicate": true})
	retry.Instance = "i0"
	got := propertiesOf(b.check(), "a6")
	if len(got) != 1 || got[0] != Identity {
		t.Errorf("violations of a6 = %v, want [identity]", got)
	}
}

// propertiesOf lists the properties r reports violated for requestID.
func propertiesOf(r Report, requestID string) []Property {
	var out []Property
	for _, v := range r.Violations {
		if v.RequestID == requestID {
			out = append(out, v.Property)
		}
	}
	return out
}
