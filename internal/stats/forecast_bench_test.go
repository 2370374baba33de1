package stats_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"payserver/internal/limits"
	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/stats"
	"payserver/internal/testutil"
)

// keyByKey reads the use of each key alone, in turn: how the forecaster
// read before it asked for many keys at once.
type keyByKey struct{ *ratelimit.Limiter }

func (k keyByKey) UsageOf(ctx context.Context, keys []ratelimit.Key) []ratelimit.KeyUsage {
	out := make([]ratelimit.KeyUsage, len(keys))
	for i, key := range keys {
		out[i].Rule, out[i].Counts, out[i].Err = k.Usage(ctx, key)
	}
	return out
}

// BenchmarkForecasterSample: one pass of the forecaster over 1,000 and
// 10,000 keys with a calendar day each and 1,000 schedules, reading the
// use of many keys at once (Limiter.UsageOf) beside reading key by key,
// on the embedded store and on Redis (PAYSERVER_TEST_REDIS_ADDR).
//
//	go run ./internal/testenv/cmd/testenv -services redis -- go test -run '^$' -bench ForecasterSample ./internal/stats/
func BenchmarkForecasterSample(b *testing.B) {
	stores := map[string]func(b *testing.B) ratelimit.Store{
		"embedded": func(*testing.B) ratelimit.Store { return ratelimit.NewLocalStore(nil) },
		"redis": func(b *testing.B) ratelimit.Store {
			s, err := redisstore.New(testutil.MustRedis(b), redisstore.Options{Prefix: fmt.Sprintf("bench:forecast:%d:", b.N)})
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
	}
	for _, keys := range []int{1000, 10000} {
		var doc strings.Builder
		doc.WriteString("limits:\n")
		for i := range keys {
			fmt.Fprintf(&doc, "  B%d:ALIPAY: [{limit: 1000000, calendar: day}]\n", i)
		}
		doc.WriteString("schedules:\n")
		for i := range 1000 {
			fmt.Fprintf(&doc, "  - {key: \"B%d:ALIPAY\", from: \"2026-12-24T00:00:00Z\", to: \"2026-12-26T00:00:00Z\", limits: 10}\n", i)
		}
		parsed, err := limits.Parse([]byte(doc.String()))
		if err != nil {
			b.Fatal(err)
		}
		for _, storeName := range []string{"embedded", "redis"} {
			for _, way := range []string{"many keys at once", "key by key"} {
				b.Run(fmt.Sprintf("%d keys/%s/%s", keys, storeName, way), func(b *testing.B) {
					lim, err := ratelimit.New(stores[storeName](b), ratelimit.Options{})
					if err != nil {
						b.Fatal(err)
					}
					lim.SetConfig(parsed.Config)
					var src stats.QuotaSource = lim
					if way == "key by key" {
						src = keyByKey{lim}
					}
					f, err := stats.NewForecaster(stats.ForecasterOptions{Source: src})
					if err != nil {
						b.Fatal(err)
					}
					for b.Loop() {
						f.Sample(context.Background())
					}
				})
			}
		}
	}
}
