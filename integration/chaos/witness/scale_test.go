package witness

import (
	"fmt"
	"testing"
)

// largeHistory is n payments at 100 a second on one key limited to
// 100/1s, 6000/1m and a calendar day, each with its 429 neighbour: the
// shape of a ten-minute campaign's history at ~170 operations a second.
func largeHistory(tb testing.TB, n int) History {
	b := newHistory(tb, `
window: 1s
zone: Asia/Shanghai
limits:
  ONLINE_PAY:ALIPAY:
    - {limit: 100, window: 1s}
    - {limit: 6000, window: 1m}
    - {amount: 100000000, calendar: day, currency: CNY}
  "*:ALIPAY": [{limit: 150, window: 1s, reserve: {REFUND: 20}}]
`)
	for i := range n {
		at := t0 + int64(i)*10*ms
		b.paid(fmt.Sprintf("p%d", i), "ONLINE_PAY", "ALIPAY", 100, at)
		if i%2 == 0 {
			b.refused(fmt.Sprintf("r%d", i), "ONLINE_PAY", "ALIPAY", 100, at+5*ms)
		}
	}
	return b.h
}

// BenchmarkCheck checks a history of 150,000 operations (100,000
// payments, 50,000 refusals) per iteration, on whatever shares the
// machine; the report must stay within seconds for a ten-minute campaign.
func BenchmarkCheck(b *testing.B) {
	h := largeHistory(b, 100000)
	b.ResetTimer()
	for b.Loop() {
		Check(h, Options{})
	}
}
