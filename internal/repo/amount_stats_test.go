package repo_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"payserver/internal/stats"
)

// TestAmountStatsSumAcrossWriters: on MariaDB and SQLite, amount rows of
// several writers for one minute, channel and currency add up, and the
// buckets sum them per hour, filtered by channel.
func TestAmountStatsSumAcrossWriters(t *testing.T) {
	for name, open := range statsCases() {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ctx := context.Background()
			row := func(minute time.Duration, ch, cur string, c stats.AmountCounts) stats.AmountRow {
				return stats.AmountRow{Minute: statsT0.Add(minute), Channel: ch, Currency: cur, AmountCounts: c}
			}
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for i := 0; i < 8; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- s.AddAmounts(ctx, []stats.AmountRow{
						row(0, "ALIPAY", "CNY", stats.AmountCounts{Admitted: 1, AdmittedAmount: 1000, Refused: 1, RefusedAmount: 500_000_000}),
						row(time.Minute, "ALIPAY", "USD", stats.AmountCounts{Admitted: 2, AdmittedAmount: 30}),
						row(2*time.Minute, "WECHAT", "CNY", stats.AmountCounts{Refused: 1, RefusedAmount: 7}),
					})
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.AmountBuckets(ctx, stats.Query{From: statsT0, To: statsT0.Add(time.Hour), Granularity: stats.Hour})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{
				"2026-03-01T10:00:00Z ALIPAY CNY admitted=8/8000 refused=8/4000000000",
				"2026-03-01T10:00:00Z ALIPAY USD admitted=16/240 refused=0/0",
				"2026-03-01T10:00:00Z WECHAT CNY admitted=0/0 refused=8/56",
			}
			checkAmounts(t, got, want)
			got, err = s.AmountBuckets(ctx, stats.Query{From: statsT0, To: statsT0.Add(time.Hour), Channel: "WECHAT", Granularity: stats.Minute})
			if err != nil {
				t.Fatal(err)
			}
			checkAmounts(t, got, []string{"2026-03-01T10:02:00Z WECHAT CNY admitted=0/0 refused=8/56"})
		})
	}
}

func checkAmounts(t *testing.T, got []stats.AmountBucket, want []string) {
	t.Helper()
	var lines []string
	for _, b := range got {
		lines = append(lines, fmt.Sprintf("%s %s %s admitted=%d/%d refused=%d/%d", b.Start.Format(time.RFC3339), b.Channel, b.Currency,
			b.Admitted, b.AdmittedAmount, b.Refused, b.RefusedAmount))
	}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("buckets =\n%v\nwant\n%v", lines, want)
	}
}
