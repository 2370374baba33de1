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

			t.Run("more buckets than n, counted against the buckets read", func(t *testing.T) {
				for _, g := range []stats.Granularity{stats.Minute, stats.Hour, stats.Day} {
					q := day
					q.Granularity = g
					all := len(mustBuckets(t, s, q))
					// Hours and days group several stored rows: n between
					// the buckets and the rows must count the groups.
					for _, n := range []int{0, 1, all - 1, all, all + 1} {
						more, err := s.MoreBucketsThan(ctx, q, n)
						if err != nil || more != (all > n) {
							t.Errorf("%s: more buckets than %d: %v, %v; want %v (%d buckets)", g, n, more, err, all > n, all)
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

// TestBucketsReadInPages: a report's buckets are read a page at a time
// (EachBucket), and the pages join into every bucket once, in order, at
// every granularity, the cap's one extra row included; no connection is
// held while the caller handles a bucket, so a second use of the store,
// even on SQLite's single connection, goes through meanwhile.
func TestBucketsReadInPages(t *testing.T) {
	for name, mk := range statsCases() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := mk(t)
			repo.SetBucketPage(s, 1000)
			t0 := statsT0.Truncate(24 * time.Hour)
			keys := []string{"PA", "PB", "PC"}
			var rows []stats.Row
			for m := range 24 * 60 { // every minute of a day: 4,320 minute buckets
				for i, k := range keys {
					rows = append(rows, stats.Row{Minute: t0.Add(time.Duration(m) * time.Minute), Key: ratelimit.Key{BizType: k, Channel: "ALIPAY"},
						Rule: "10/1s", Counts: stats.Counts{Attempts: int64(1 + i), Admitted: 1}})
				}
			}
			for d := 1; d < 31; d++ { // one minute an hour for 30 more days: 2,232 hour buckets in all
				for h := range 24 {
					for _, k := range keys {
						rows = append(rows, stats.Row{Minute: t0.Add(time.Duration(d*24+h) * time.Hour), Key: ratelimit.Key{BizType: k, Channel: "ALIPAY"},
							Rule: "10/1s", Counts: stats.Counts{Attempts: 1, Admitted: 1}})
					}
				}
			}
			for i := 0; i < len(rows); i += 1000 {
				if err := s.Add(ctx, rows[i:min(i+1000, len(rows))]); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []struct {
				g       stats.Granularity
				span    time.Duration
				want    int
				maxRows int
			}{
				{stats.Minute, 24 * time.Hour, 4320, 0},
				{stats.Hour, 31 * 24 * time.Hour, 2232, 0},
				{stats.Minute, 24 * time.Hour, 2501, 2500},
				{stats.Hour, 31 * 24 * time.Hour, 2101, 2100},
			} {
				q := stats.Query{From: t0, To: t0.Add(c.span), Granularity: c.g, MaxRows: c.maxRows}
				var got []stats.Bucket
				err := s.EachBucket(ctx, q, func(b stats.Bucket) error {
					if len(got) == 0 {
						// A write while the reader handles a bucket: it
						// must not wait for the read to end.
						wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
						defer cancel()
						if err := s.Add(wctx, []stats.Row{{Minute: t0.Add(-time.Hour), Key: ratelimit.Key{BizType: "PZ", Channel: "ALIPAY"}, Rule: "1/1s"}}); err != nil {
							return fmt.Errorf("a write while a bucket is handled: %w", err)
						}
					}
					got = append(got, b)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != c.want {
					t.Fatalf("%s over %v, cap %d: %d buckets, want %d", c.g, c.span, c.maxRows, len(got), c.want)
				}
				for i := 1; i < len(got); i++ {
					a, b := got[i-1], got[i]
					if !a.Start.Before(b.Start) && !(a.Start.Equal(b.Start) && a.Key.BizType < b.Key.BizType) {
						t.Fatalf("%s: bucket %d (%v %s) after bucket %d (%v %s): out of order or twice", c.g, i, b.Start, b.Key, i-1, a.Start, a.Key)
					}
				}
				if c.g == stats.Hour && c.maxRows == 0 && (got[0].Attempts != 60 || got[2].Attempts != 180) {
					t.Fatalf("the first hour's buckets: %+v %+v, want 60 and 180 attempts (60 minutes summed)", got[0], got[2])
				}
			}
		})
	}
}
