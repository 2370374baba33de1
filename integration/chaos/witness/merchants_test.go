package witness

import (
	"fmt"
	"testing"
)

const merchantDoc = `
limits:
  ONLINE_PAY:ALIPAY:
    - {limit: 10, window: 1s, perMerchant: 2, merchants: {M_VIP: 3, M_FREE: -1}}
`

// TestMerchantLimits: a merchant's own use of a window is held to its
// limit (its override, else perMerchant; none for -1), apart from the
// window's, and a refusal by a full merchant limit is justified.
func TestMerchantLimits(t *testing.T) {
	pay := func(b *builder, rid, merchant string, at int64) {
		b.paid(rid, "ONLINE_PAY", "ALIPAY", 100, at)
		b.h.Orders[len(b.h.Orders)-1].MerchantID = merchant
		b.h.Ops[len(b.h.Ops)-1].MerchantID = merchant
	}
	tests := []struct {
		name      string
		merchants []string
		want      []Property
		checks    int
	}{
		{"each within its own", []string{"M1", "M1", "M2", "M2", "M_VIP", "M_VIP", "M_VIP"}, nil, 7},
		{"a third of M1's", []string{"M1", "M1", "M1"}, []Property{WithinLimits}, 3},
		{"a fourth of M_VIP's", []string{"M_VIP", "M_VIP", "M_VIP", "M_VIP"}, []Property{WithinLimits}, 4},
		{"no limit for M_FREE", []string{"M_FREE", "M_FREE", "M_FREE", "M_FREE"}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHistory(t, merchantDoc)
			for i, m := range tt.merchants {
				pay(b, "r"+string(rune('a'+i)), m, t0+int64(i)*10*ms)
			}
			r := b.check()
			wantViolations(t, r, tt.want...)
			if r.MerchantChecks != tt.checks {
				t.Errorf("merchant checks = %d, want %d", r.MerchantChecks, tt.checks)
			}
		})
	}
	t.Run("refused by a full merchant limit", func(t *testing.T) {
		b := newHistory(t, merchantDoc)
		pay(b, "ra", "M1", t0)
		pay(b, "rb", "M1", t0+10*ms)
		b.refused("rc", "ONLINE_PAY", "ALIPAY", 100, t0+20*ms).MerchantID = "M1"
		wantViolations(t, b.check())
	})
	// A 429 naming the merchant's limit is justified by the merchant's
	// own use only: with the key's window full from other merchants' use
	// and M1 with none, it is a false refusal; naming the key's window,
	// it is not.
	for _, tt := range []struct {
		scope string
		want  []Property
	}{{"merchant", []Property{NoFalseRefusal}}, {"key", nil}} {
		t.Run("a full key's window, refusal scoped "+tt.scope, func(t *testing.T) {
			b := newHistory(t, `
limits:
  ONLINE_PAY:ALIPAY:
    - {limit: 4, window: 1s, perMerchant: 2}
`)
			for i, m := range []string{"M2", "M2", "M3", "M3"} {
				pay(b, "r"+string(rune('a'+i)), m, t0+int64(i)*10*ms)
			}
			op := b.op("pay", "rz", "ONLINE_PAY", "ALIPAY", 100, t0+50*ms, 429, limited(map[string]any{"bizType": "ONLINE_PAY", "channel": "ALIPAY", "scope": tt.scope, "merchantId": "M1"}))
			op.MerchantID = "M1"
			wantViolations(t, b.check(), tt.want...)
		})
	}
}

// TestInProcessSharesOfTheLimitsDuringTheFault: under policy local the
// in-process admissions of a Redis fault are bounded by each instance's
// share of the limits in force during the fault, not of those in force at
// a later check. M3 admits 4 in process under a 1 s limit of 4 for each
// merchant; a document that lowers it to 1 comes after, and M3's checks
// under it meet those 4 in its 10 s window, on top of its 12 on Redis.
func TestInProcessSharesOfTheLimitsDuringTheFault(t *testing.T) {
	const during = `
limits:
  ONLINE_PAY:ALIPAY:
    - {limit: 20, window: 1s, perMerchant: 4}
    - {limit: 60, window: 10s, perMerchant: 12}
`
	const after = `
limits:
  ONLINE_PAY:ALIPAY:
    - {limit: 20, window: 1s, perMerchant: 1}
    - {limit: 60, window: 10s, perMerchant: 12}
`
	pay := func(b *builder, rid string, at int64) {
		b.paid(rid, "ONLINE_PAY", "ALIPAY", 100, at)
		b.h.Orders[len(b.h.Orders)-1].MerchantID = "M3"
		b.h.Ops[len(b.h.Ops)-1].MerchantID = "M3"
	}
	tests := []struct {
		name      string
		inProcess int
		want      []Property
	}{
		{"the shares of the limits during the fault", 4, nil},
		{"beyond those shares", 14, []Property{WithinLimits}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHistory(t, during)
			b.fault("redis", t0, t0+2600*ms, 0)
			for i := range tt.inProcess {
				pay(b, fmt.Sprintf("l%d", i), t0+100*ms+int64(i)*2400*ms/int64(tt.inProcess))
			}
			// On Redis under the first document, 0.3 s apart (within 4 a
			// second), then 1 s apart under the second.
			b.publish(after, t0+5600*ms)
			at := t0 + 3*sec
			for i := range 12 {
				if at >= t0+5500*ms {
					at = max(at, t0+7600*ms)
				}
				pay(b, fmt.Sprintf("r%d", i), at)
				if at < t0+7600*ms {
					at += 300 * ms
				} else {
					at += sec
				}
			}
			wantViolations(t, b.check(), tt.want...)
		})
	}
}
