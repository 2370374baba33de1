package repo_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"payserver/internal/pay"
	"payserver/internal/repo"
	"payserver/internal/stats"
)

// TestRoutedOrders: on every database and store variant, a routed order's
// RoutedFrom round-trips (empty stays empty, not nil; a pinned order's nil
// stays nil), Reroute moves only a PROCESSING claim of its owner from the
// channel it names, and a batched create keeps RoutedFrom too.
func TestRoutedOrders(t *testing.T) {
	for name, mk := range openCases() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := mk(t)
			pinned, first, skipped := newOrder("pinned"), newOrder("first"), newOrder("skipped")
			first.RoutedFrom = []pay.RouteSkip{}
			skipped.RoutedFrom = []pay.RouteSkip{{Channel: "WECHAT", Reason: pay.ReasonLimited}, {Channel: "UNIONPAY", Reason: pay.ReasonClosed}}
			for _, o := range []*pay.Order{pinned, first, skipped} {
				if err := s.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
				got, err := s.Get(ctx, o.RequestID)
				if err != nil || !reflect.DeepEqual(got.RoutedFrom, o.RoutedFrom) {
					t.Fatalf("%s: RoutedFrom %#v, want %#v (%v)", o.RequestID, got.RoutedFrom, o.RoutedFrom, err)
				}
			}

			moved := *skipped
			moved.Channel = "UNIONPAY2"
			moved.RoutedFrom = append(append([]pay.RouteSkip{}, skipped.RoutedFrom...), pay.RouteSkip{Channel: "ALIPAY", Reason: pay.ReasonUnhealthy})
			moved.UpdatedAt = moved.UpdatedAt.Add(time.Second)
			if err := s.Reroute(ctx, &moved, "WECHAT"); !errors.Is(err, pay.ErrOrderNotFound) {
				t.Fatalf("reroute from a channel the claim does not name: %v, want ErrOrderNotFound", err)
			}
			stranger := moved
			stranger.OrderNo = "PS-someone-else"
			if err := s.Reroute(ctx, &stranger, "ALIPAY"); !errors.Is(err, pay.ErrOrderNotFound) {
				t.Fatalf("reroute by another claimant: %v, want ErrOrderNotFound", err)
			}
			if err := s.Reroute(ctx, &moved, "ALIPAY"); err != nil {
				t.Fatal(err)
			}
			got, _ := s.Get(ctx, "skipped")
			if got.Channel != "UNIONPAY2" || !reflect.DeepEqual(got.RoutedFrom, moved.RoutedFrom) || got.Status != pay.StatusProcessing {
				t.Fatalf("after reroute %+v", got)
			}
			if err := s.Reroute(ctx, &moved, "ALIPAY"); !errors.Is(err, pay.ErrOrderNotFound) {
				t.Fatalf("second reroute from ALIPAY: %v, want ErrOrderNotFound", err)
			}
			done := *got
			done.Status = pay.StatusSucceeded
			if err := s.Finish(ctx, &done); err != nil {
				t.Fatal(err)
			}
			back := done
			back.Channel = "ALIPAY"
			if err := s.Reroute(ctx, &back, "UNIONPAY2"); !errors.Is(err, pay.ErrOrderNotFound) {
				t.Fatalf("reroute of a final order: %v, want ErrOrderNotFound", err)
			}
		})
	}
}

// TestRouteStatsAddUp: counts from several flushes (instances) add up per
// minute, bizType, from, to and reason, on every database.
func TestRouteStatsAddUp(t *testing.T) {
	for name, open := range databases() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := repo.NewRouteStats(open(t))
			if err != nil {
				t.Fatal(err)
			}
			m := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
			rows := []stats.RouteRow{
				{Minute: m, BizType: "P", To: "A", Count: 3},
				{Minute: m, BizType: "P", From: "A", To: "B", Reason: "limited", Count: 2},
			}
			for range 2 {
				if err := s.AddRoutes(ctx, rows); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.AddRoutes(ctx, []stats.RouteRow{{Minute: m.Add(time.Minute), BizType: "Q", From: "A", Reason: "closed", Count: 1}}); err != nil {
				t.Fatal(err)
			}
			got, err := s.Routes(ctx, m, m.Add(time.Hour), "P")
			if err != nil {
				t.Fatal(err)
			}
			want := []stats.RouteRow{
				{Minute: m, BizType: "P", From: "", To: "A", Count: 6},
				{Minute: m, BizType: "P", From: "A", To: "B", Reason: "limited", Count: 4},
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
			all, _ := s.Routes(ctx, m, m.Add(time.Hour), "")
			rep := stats.SummarizeRoutes(all)
			if len(rep) != 2 || rep[0].Payments["A"] != 6 || rep[1].Fallbacks[0].Count != 1 || rep[1].Fallbacks[0].To != "" {
				t.Fatalf("summary %+v", rep)
			}
		})
	}
}
