package repo_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"payserver/internal/ratelimit"
	"payserver/internal/repo"
	"payserver/internal/stats"
)

// statsCases opens a migrated, empty database of every supported kind.
func statsCases() map[string]func(t *testing.T) *repo.ChannelStats {
	out := map[string]func(t *testing.T) *repo.ChannelStats{}
	for name, open := range databases() {
		out[name] = func(t *testing.T) *repo.ChannelStats {
			s, err := repo.NewChannelStats(open(t))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	return out
}

var statsT0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func statsRow(minute time.Duration, biz, ch, rule string, c stats.Counts) stats.Row {
	return stats.Row{Minute: statsT0.Add(minute), Key: ratelimit.Key{BizType: biz, Channel: ch}, Rule: rule, Counts: c}
}

func mustBuckets(t *testing.T, s *repo.ChannelStats, q stats.Query) []stats.Bucket {
	t.Helper()
	b, err := s.Buckets(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func bucketString(b stats.Bucket) string {
	return fmt.Sprintf("%s %s rule=%q seen=%d %+v", b.Start.Format(time.RFC3339), b.Key, b.Rule, b.RulesSeen, b.Counts)
}

func checkBuckets(t *testing.T, got, want []stats.Bucket) {
	t.Helper()
	if len(got) != len(want) {
		for _, b := range got {
			t.Log(bucketString(b))
		}
		t.Fatalf("got %d buckets, want %d", len(got), len(want))
	}
	for i := range want {
		if g, w := bucketString(got[i]), bucketString(want[i]); g != w {
			t.Errorf("bucket %d:\ngot  %s\nwant %s", i, g, w)
		}
	}
}

func TestChannelStatsSuite(t *testing.T) {
	for name, mk := range statsCases() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := mk(t)
			day := stats.Query{From: statsT0, To: statsT0.Add(24 * time.Hour), Granularity: stats.Minute}

			t.Run("empty table has no buckets", func(t *testing.T) {
				checkBuckets(t, mustBuckets(t, s, day), nil)
			})

			// Two instances write the same minutes: counts add up, the peak is the
			// larger, the rule is the last writer's.
			a := []stats.Row{
				statsRow(0, "PAY", "ALIPAY", "10/1s", stats.Counts{Attempts: 5, Admitted: 4, Limited: 1, NearCacheRefusals: 1, PeakUtilization: 1}),
				statsRow(0, "other", "WECHAT", "unlimited", stats.Counts{Attempts: 2, Admitted: 2}),
				statsRow(time.Minute, "PAY", "ALIPAY", "10/1s", stats.Counts{Attempts: 1, Admitted: 1, Released: 1, PeakUtilization: 0.1}),
			}
			b := []stats.Row{
				statsRow(0, "PAY", "ALIPAY", "10/1s", stats.Counts{Attempts: 3, Admitted: 3, ShadowLimited: 0, Degraded: 2, PeakUtilization: 0.5}),
				statsRow(0, "OTHER", "WECHAT", "5/1s", stats.Counts{Attempts: 7, Admitted: 7}), // a real bizType OTHER
				statsRow(time.Minute, "PAY", "ALIPAY", "20/1s", stats.Counts{Attempts: 2, Admitted: 1, Limited: 1, PeakUtilization: 1}),
				statsRow(61*time.Minute, "SHOP", "ALIPAY", "4/1m (shadow)", stats.Counts{Attempts: 4, Admitted: 4, ShadowLimited: 1, PeakUtilization: 1}),
			}
			for _, rows := range [][]stats.Row{a, b} {
				if err := s.Add(ctx, rows); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Add(ctx, nil); err != nil {
				t.Fatalf("empty add: %v", err)
			}

			t.Run("minute buckets add up across writers", func(t *testing.T) {
				checkBuckets(t, mustBuckets(t, s, day), []stats.Bucket{
					{Start: statsT0, Key: ratelimit.Key{BizType: "OTHER", Channel: "WECHAT"}, Rule: "5/1s", RulesSeen: 1, Counts: stats.Counts{Attempts: 7, Admitted: 7}},
					{Start: statsT0, Key: ratelimit.Key{BizType: "PAY", Channel: "ALIPAY"}, Rule: "10/1s", RulesSeen: 1,
						Counts: stats.Counts{Attempts: 8, Admitted: 7, Limited: 1, Degraded: 2, NearCacheRefusals: 1, PeakUtilization: 1}},
					{Start: statsT0, Key: ratelimit.Key{BizType: "other", Channel: "WECHAT"}, Rule: "unlimited", RulesSeen: 1, Counts: stats.Counts{Attempts: 2, Admitted: 2}},
					{Start: statsT0.Add(time.Minute), Key: ratelimit.Key{BizType: "PAY", Channel: "ALIPAY"}, Rule: "20/1s", RulesSeen: 1,
						Counts: stats.Counts{Attempts: 3, Admitted: 2, Limited: 1, Released: 1, PeakUtilization: 1}},
					{Start: statsT0.Add(61 * time.Minute), Key: ratelimit.Key{BizType: "SHOP", Channel: "ALIPAY"}, Rule: "4/1m (shadow)", RulesSeen: 1,
						Counts: stats.Counts{Attempts: 4, Admitted: 4, ShadowLimited: 1, PeakUtilization: 1}},
				})
			})

			t.Run("a capped query reads one bucket more than its cap", func(t *testing.T) {
				for _, g := range []stats.Granularity{stats.Minute, stats.Hour} {
					q := day
					q.Granularity, q.MaxRows = g, 1
					if got := mustBuckets(t, s, q); len(got) != 2 {
						t.Errorf("%s buckets with MaxRows 1: got %d, want 2 (the cap and one to tell it is over)", g, len(got))
					}
				}
			})

			t.Run("a count is the buckets', up to one more than its limit", func(t *testing.T) {
				for _, g := range []stats.Granularity{stats.Minute, stats.Hour, stats.Day} {
					q := day
					q.Granularity = g
					all := len(mustBuckets(t, s, q))
					for _, limit := range []int{0, 1, all} {
						n, err := s.CountBuckets(ctx, q, limit)
						want := all
						if limit > 0 {
							want = min(all, limit+1)
						}
						if err != nil || n != want {
							t.Errorf("%s buckets counted with limit %d: %d, %v; want %d of %d", g, limit, n, err, want, all)
						}
					}
				}
			})

			t.Run("hour buckets sum minutes and keep the last minute's rule", func(t *testing.T) {
				q := day
				q.Granularity = stats.Hour
				q.BizType = "PAY"
				checkBuckets(t, mustBuckets(t, s, q), []stats.Bucket{
					{Start: statsT0, Key: ratelimit.Key{BizType: "PAY", Channel: "ALIPAY"}, Rule: "20/1s", RulesSeen: 2,
						Counts: stats.Counts{Attempts: 11, Admitted: 9, Limited: 2, Degraded: 2, Released: 1, NearCacheRefusals: 1, PeakUtilization: 1}},
				})
			})

			t.Run("day buckets and filters", func(t *testing.T) {
				q := stats.Query{From: statsT0.Truncate(24 * time.Hour), To: statsT0.Truncate(24 * time.Hour).Add(24 * time.Hour), Granularity: stats.Day, Channel: "WECHAT"}
				checkBuckets(t, mustBuckets(t, s, q), []stats.Bucket{
					{Start: statsT0.Truncate(24 * time.Hour), Key: ratelimit.Key{BizType: "OTHER", Channel: "WECHAT"}, Rule: "5/1s", RulesSeen: 1, Counts: stats.Counts{Attempts: 7, Admitted: 7}},
					{Start: statsT0.Truncate(24 * time.Hour), Key: ratelimit.Key{BizType: "other", Channel: "WECHAT"}, Rule: "unlimited", RulesSeen: 1, Counts: stats.Counts{Attempts: 2, Admitted: 2}},
				})
				q.BizType = stats.Other
				if got := mustBuckets(t, s, q); len(got) != 1 || got[0].Key.BizType != "other" {
					t.Fatalf("bizType other matched %v", got)
				}
			})

			t.Run("to is exclusive", func(t *testing.T) {
				q := stats.Query{From: statsT0.Add(time.Minute), To: statsT0.Add(61 * time.Minute), Granularity: stats.Minute}
				got := mustBuckets(t, s, q)
				if len(got) != 1 || !got[0].Start.Equal(statsT0.Add(time.Minute)) {
					for _, b := range got {
						t.Log(bucketString(b))
					}
					t.Fatalf("got %d buckets, want only 10:01", len(got))
				}
			})

			t.Run("keys select their own buckets", func(t *testing.T) {
				shop, other := ratelimit.Key{BizType: "SHOP", Channel: "ALIPAY"}, ratelimit.Key{BizType: "other", Channel: "WECHAT"}
				for _, c := range []struct {
					granularity stats.Granularity
					channel     string
					want        []ratelimit.Key
				}{
					{stats.Minute, "", []ratelimit.Key{other, shop}},
					{stats.Hour, "", []ratelimit.Key{other, shop}},
					{stats.Minute, "WECHAT", []ratelimit.Key{other}},
				} {
					q := stats.Query{From: statsT0, To: statsT0.Add(24 * time.Hour), Granularity: c.granularity, Channel: c.channel,
						Keys: []ratelimit.Key{shop, other, {BizType: "NONE", Channel: "ALIPAY"}}}
					var got []ratelimit.Key
					for _, b := range mustBuckets(t, s, q) {
						got = append(got, b.Key)
					}
					if fmt.Sprint(got) != fmt.Sprint(c.want) {
						t.Errorf("%s buckets of %v on channel %q: %v, want %v", c.granularity, q.Keys, c.channel, got, c.want)
					}
				}
				q := stats.Query{From: statsT0, To: statsT0.Add(time.Hour), Granularity: stats.Minute, Keys: make([]ratelimit.Key, stats.MaxQueryKeys+1)}
				if _, err := s.Buckets(ctx, q); err == nil {
					t.Errorf("%d keys read, want an error past %d", len(q.Keys), stats.MaxQueryKeys)
				}
			})

			t.Run("concurrent writers lose nothing", func(t *testing.T) {
				const writers, rounds = 4, 25
				var wg sync.WaitGroup
				errs := make(chan error, writers*rounds)
				for w := 0; w < writers; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; i < rounds; i++ {
							var rows []stats.Row
							for m := 0; m < 150; m++ { // two INSERT chunks
								rows = append(rows, statsRow(time.Duration(120+m)*time.Minute, "CONC", "ALIPAY", "9/1s", stats.Counts{Attempts: 1, Limited: 1}))
							}
							if err := s.Add(ctx, rows); err != nil {
								errs <- err
							}
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
				q := stats.Query{From: statsT0, To: statsT0.Add(24 * time.Hour), Granularity: stats.Day, BizType: "CONC"}
				got := mustBuckets(t, s, q)
				if len(got) != 1 || got[0].Attempts != writers*rounds*150 || got[0].Limited != writers*rounds*150 {
					for _, b := range got {
						t.Log(bucketString(b))
					}
					t.Fatalf("want one bucket with %d attempts", writers*rounds*150)
				}
			})
		})
	}
}

func TestNewChannelStatsRefusesNil(t *testing.T) {
	if _, err := repo.NewChannelStats(nil); err == nil {
		t.Fatal("nil db accepted")
	}
}
