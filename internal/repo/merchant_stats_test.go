package repo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// TestMerchantStatsSumAcrossWriters: on MariaDB and SQLite, merchant rows
// of two writers for one minute, key and merchant add up; merchant IDs
// differing only in case, or in a trailing space (which MariaDB's PAD
// SPACE collations ignore), stay apart; the buckets sum them per hour,
// filtered by key, and a read stops one row past MaxRows.
func TestMerchantStatsSumAcrossWriters(t *testing.T) {
	for name, open := range statsCases() {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ctx := context.Background()
			pay, shop := ratelimit.Key{BizType: "PAY", Channel: "ALIPAY"}, ratelimit.Key{BizType: "SHOP", Channel: "ALIPAY"}
			row := func(minute time.Duration, k ratelimit.Key, m string, admitted, refused int64) stats.MerchantRow {
				return stats.MerchantRow{Minute: statsT0.Add(minute), Key: k, Merchant: m,
					MerchantCounts: stats.MerchantCounts{Admitted: admitted, Refused: refused}}
			}
			for i := 0; i < 2; i++ {
				if err := s.AddMerchants(ctx, []stats.MerchantRow{
					row(0, pay, "M_1", 3, 1), row(0, pay, "m_1", 1, 0), row(0, pay, "商户-7", 0, 2), row(0, pay, "M_1 ", 1, 1),
					row(time.Minute, pay, "M_1", 1, 0), row(time.Minute, pay, stats.Other, 5, 5),
					row(0, shop, ratelimit.NoMerchant, 2, 0),
				}); err != nil {
					t.Fatal(err)
				}
			}
			hour := stats.Query{From: statsT0, To: statsT0.Add(time.Hour), Granularity: stats.Hour}
			checkMerchants(t, s, hour, []string{
				"10:00 PAY:ALIPAY M_1 8/2", "10:00 PAY:ALIPAY M_1  2/2", "10:00 PAY:ALIPAY m_1 2/0", "10:00 PAY:ALIPAY other 10/10",
				"10:00 PAY:ALIPAY 商户-7 0/4", "10:00 SHOP:ALIPAY - 4/0",
			})
			byKey := hour
			byKey.Granularity, byKey.Keys = stats.Minute, []ratelimit.Key{shop}
			checkMerchants(t, s, byKey, []string{"10:00 SHOP:ALIPAY - 4/0"})
			capped := hour
			capped.MaxRows = 2
			checkMerchants(t, s, capped, []string{
				"10:00 PAY:ALIPAY M_1 8/2", "10:00 PAY:ALIPAY M_1  2/2", "10:00 PAY:ALIPAY m_1 2/0",
			})
		})
	}
}

func checkMerchants(t *testing.T, s interface {
	MerchantBuckets(context.Context, stats.Query) ([]stats.MerchantBucket, error)
}, q stats.Query, want []string) {
	t.Helper()
	got, err := s.MerchantBuckets(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, b := range got {
		lines = append(lines, fmt.Sprintf("%s %s %s %d/%d", b.Start.Format("15:04"), b.Key, b.Merchant, b.Admitted, b.Refused))
	}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("buckets =\n%v\nwant\n%v", lines, want)
	}
}
