package repo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"payserver/internal/pay"
	"payserver/internal/repo"
)

// TestOldestUnresolved: the UNKNOWN orders, the oldest first, at most the
// limit, with their channel and the resolver's next step; other orders are
// not listed.
func TestOldestUnresolved(t *testing.T) {
	for name, open := range databases() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := repo.NewOrdersWithOptions(open(t), repo.OrdersOptions{})
			if err != nil {
				t.Fatal(err)
			}
			base := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
			for i, status := range []pay.Status{pay.StatusUnknown, pay.StatusSucceeded, pay.StatusUnknown, pay.StatusUnknown} {
				at := base.Add(time.Duration(3-i) * time.Minute) // the last one is the oldest
				o := &pay.Order{OrderNo: fmt.Sprintf("O%d", i), RequestID: fmt.Sprintf("R%d", i), RequestHash: "h", BizType: "B",
					Channel: []string{"ALIPAY", "WECHAT"}[i%2], MerchantID: "m", Amount: 100, Currency: "CNY",
					Status: pay.StatusProcessing, CreatedAt: at, UpdatedAt: at}
				if err := s.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
				o.Status, o.FailureCode = status, "CHANNEL_TIMEOUT"
				if status == pay.StatusSucceeded {
					o.FailureCode = ""
				}
				if err := s.Finish(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.OldestUnresolved(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0].RequestID != "R3" || got[1].RequestID != "R2" || got[0].Channel != "WECHAT" || got[1].Channel != "ALIPAY" {
				t.Fatalf("got %+v, want R3 (WECHAT) then R2 (ALIPAY)", got)
			}
			if got[0].Close || got[0].Since.IsZero() || !got[0].LeasedUntil.IsZero() {
				t.Errorf("R3 = %+v, want a query next, its time, no lease", got[0])
			}
		})
	}
}
