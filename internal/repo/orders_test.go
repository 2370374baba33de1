package repo_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/pay"
	"payserver/internal/repo"
	"payserver/internal/testutil"
)

// openCases returns an order store on every supported database: with the
// default options (NewOrders), with every call batched (group commit and
// batched reads), and with every call a statement of its own.
func openCases() map[string]func(t *testing.T) *repo.Orders {
	out := map[string]func(t *testing.T) *repo.Orders{}
	for name, open := range databases() {
		out[name] = func(t *testing.T) *repo.Orders {
			o, err := repo.NewOrders(open(t))
			if err != nil {
				t.Fatal(err)
			}
			return o
		}
		for variant, opts := range map[string]repo.OrdersOptions{"grouped": groupedOptions, "single": {}} {
			out[name+"/"+variant] = func(t *testing.T) *repo.Orders {
				o, err := repo.NewOrdersWithOptions(open(t), opts)
				if err != nil {
					t.Fatal(err)
				}
				return o
			}
		}
	}
	return out
}

func newOrder(requestID string) *pay.Order {
	now := time.Now().UTC().Truncate(time.Microsecond)
	return &pay.Order{
		OrderNo: "PS" + requestID + "-" + testutil.UniqueName(""), RequestID: requestID, RequestHash: "h1",
		BizType: "ONLINE_PAY", Channel: "ALIPAY", MerchantID: "商户-1", Amount: 1000, Currency: "CNY",
		Subject: "测试", Status: pay.StatusProcessing, CreatedAt: now, UpdatedAt: now,
	}
}

func TestOrderStoreSuite(t *testing.T) {
	for name, mk := range openCases() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := mk(t)
			t.Run("create then get round-trips every field", func(t *testing.T) {
				o := newOrder("r-1")
				if err := s.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
				got, err := s.Get(ctx, "r-1")
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(*got, *o) {
					t.Fatalf("got %+v\nwant %+v", got, o)
				}
			})
			t.Run("timestamps answer what is stored", func(t *testing.T) {
				// A clock with nanoseconds: the order must come back from
				// Create, Finish and Reroute as Get reads it, so the first
				// answer of a payment equals every later one.
				at := time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.UTC)
				o := newOrder("r-ns")
				o.CreatedAt, o.UpdatedAt = at, at
				if err := s.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
				got, err := s.Get(ctx, "r-ns")
				if err != nil {
					t.Fatal(err)
				}
				if !got.CreatedAt.Equal(o.CreatedAt) || !got.UpdatedAt.Equal(o.UpdatedAt) {
					t.Fatalf("after Create: order says created %s updated %s, stored %s and %s", o.CreatedAt, o.UpdatedAt, got.CreatedAt, got.UpdatedAt)
				}
				moved := *o
				moved.Channel, moved.RoutedFrom, moved.UpdatedAt = "WECHAT", []pay.RouteSkip{}, at.Add(time.Second)
				if err := s.Reroute(ctx, &moved, o.Channel); err != nil {
					t.Fatal(err)
				}
				if got, _ = s.Get(ctx, "r-ns"); !got.UpdatedAt.Equal(moved.UpdatedAt) {
					t.Fatalf("after Reroute: order says updated %s, stored %s", moved.UpdatedAt, got.UpdatedAt)
				}
				moved.Status, moved.ChannelTradeNo, moved.UpdatedAt = pay.StatusSucceeded, "T-ns", at.Add(2*time.Second)
				if err := s.Finish(ctx, &moved); err != nil {
					t.Fatal(err)
				}
				if got, _ = s.Get(ctx, "r-ns"); !got.UpdatedAt.Equal(moved.UpdatedAt) {
					t.Fatalf("after Finish: order says updated %s, stored %s", moved.UpdatedAt, got.UpdatedAt)
				}
			})
			t.Run("duplicate requestId is refused", func(t *testing.T) {
				o := newOrder("r-dup")
				if err := s.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
				o2 := newOrder("r-dup")
				o2.OrderNo = "other"
				if err := s.Create(ctx, o2); !errors.Is(err, pay.ErrDuplicateOrder) {
					t.Fatalf("second create: %v, want ErrDuplicateOrder", err)
				}
			})
			t.Run("requestIds are case-sensitive", func(t *testing.T) {
				if err := s.Create(ctx, newOrder("Case-A")); err != nil {
					t.Fatal(err)
				}
				if err := s.Create(ctx, newOrder("case-a")); err != nil {
					t.Fatalf("case-a collided with Case-A: %v", err)
				}
			})
			t.Run("concurrent creates: exactly one wins", func(t *testing.T) {
				var wins, dups atomic.Int64
				var wg sync.WaitGroup
				for i := 0; i < 50; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						o := newOrder("r-race")
						o.OrderNo = "PS-race-" + time.Now().Format("150405.000000000") + string(rune('a'+i%26)) + string(rune('a'+i/26))
						switch err := s.Create(ctx, o); {
						case err == nil:
							wins.Add(1)
						case errors.Is(err, pay.ErrDuplicateOrder):
							dups.Add(1)
						default:
							t.Errorf("create: %v", err)
						}
					}(i)
				}
				wg.Wait()
				if wins.Load() != 1 || dups.Load() != 49 {
					t.Fatalf("wins=%d dups=%d, want 1 and 49", wins.Load(), dups.Load())
				}
			})
			t.Run("finish records the outcome once processing", func(t *testing.T) {
				o := newOrder("r-fin")
				_ = s.Create(ctx, o)
				o.Status, o.ChannelTradeNo, o.UpdatedAt = pay.StatusSucceeded, "T1", o.UpdatedAt.Add(time.Second)
				if err := s.Finish(ctx, o); err != nil {
					t.Fatal(err)
				}
				got, _ := s.Get(ctx, "r-fin")
				if got.Status != pay.StatusSucceeded || got.ChannelTradeNo != "T1" {
					t.Fatalf("after finish: %+v", got)
				}
				o.Status = pay.StatusFailed
				if err := s.Finish(ctx, o); !errors.Is(err, pay.ErrOrderNotFound) {
					t.Fatalf("finishing a SUCCEEDED order: %v, want ErrOrderNotFound", err)
				}
			})
			t.Run("recording the same UNKNOWN outcome twice is not 'not found'", func(t *testing.T) {
				// MariaDB counts changed rows unless the connection asks for
				// matched rows (clientFoundRows, set by Open), SQLite matched.
				o := newOrder("r-unk2")
				_ = s.Create(ctx, o)
				o.Status, o.FailureCode, o.UpdatedAt = pay.StatusUnknown, "CHANNEL_TIMEOUT", o.UpdatedAt.Add(time.Second)
				if err := s.Finish(ctx, o); err != nil {
					t.Fatal(err)
				}
				if err := s.Finish(ctx, o); err != nil {
					t.Fatalf("the same outcome again: %v, want nil", err)
				}
			})
			t.Run("stale processing orders become unknown", func(t *testing.T) {
				old := newOrder("r-stale")
				old.UpdatedAt = time.Now().Add(-time.Hour).UTC()
				_ = s.Create(ctx, old)
				fresh := newOrder("r-fresh")
				_ = s.Create(ctx, fresh)
				if _, err := s.MarkStaleUnknown(ctx, time.Now().Add(-time.Minute)); err != nil {
					t.Fatal(err)
				}
				if got, _ := s.Get(ctx, "r-stale"); got.Status != pay.StatusUnknown || got.FailureCode != "OUTCOME_NOT_RECORDED" ||
					!got.UpdatedAt.After(old.UpdatedAt) {
					t.Fatalf("stale order: got %s %s updated %v, want UNKNOWN OUTCOME_NOT_RECORDED updated now", got.Status, got.FailureCode, got.UpdatedAt)
				}
				if got, _ := s.Get(ctx, "r-fresh"); got.Status != pay.StatusProcessing {
					t.Fatalf("fresh order status %s, want PROCESSING", got.Status)
				}
			})
			t.Run("missing order", func(t *testing.T) {
				if _, err := s.Get(ctx, "nope"); !errors.Is(err, pay.ErrOrderNotFound) {
					t.Fatalf("err = %v, want ErrOrderNotFound", err)
				}
			})
		})
	}
}
