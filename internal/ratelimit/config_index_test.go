package ratelimit_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// TestScheduleIndexChangesNothing: RuleAt and NextChange answer the same
// for every key at every instant whether a Config's schedules are indexed
// by key (IndexSchedules, as limits.Parse leaves them) or read in full, on
// random schedules of several keys in any order, overlapping or not.
func TestScheduleIndexChangesNothing(t *testing.T) {
	testutil.PropertyChecks(t, 300)
	t0 := time.Date(2026, 12, 24, 0, 0, 0, 0, time.UTC)
	keys := []ratelimit.Key{{BizType: "A", Channel: "C"}, {BizType: "B", Channel: "C"}, {BizType: "*", Channel: "C"}, {BizType: "A", Channel: "D"}}
	rapid.Check(t, func(rt *rapid.T) {
		plain := &ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{}}
		for range rapid.IntRange(0, 12).Draw(rt, "schedules") {
			from := t0.Add(time.Duration(rapid.IntRange(0, 100).Draw(rt, "from")) * time.Minute)
			plain.Schedules = append(plain.Schedules, ratelimit.Schedule{
				Key:  rapid.SampledFrom(keys).Draw(rt, "key"),
				From: from, To: from.Add(time.Duration(rapid.IntRange(1, 60).Draw(rt, "length")) * time.Minute),
				Rule: ratelimit.Rule{Windows: []ratelimit.Window{{Limit: int64(rapid.IntRange(0, 9).Draw(rt, "limit")), Size: time.Second}}},
			})
		}
		indexed := *plain
		indexed.IndexSchedules()
		for _, k := range keys {
			for m := -1; m <= 170; m++ {
				at := t0.Add(time.Duration(m) * time.Minute)
				if got, want := indexed.RuleAt(k, at), plain.RuleAt(k, at); !reflect.DeepEqual(got, want) {
					rt.Fatalf("RuleAt(%s, %s): indexed %+v, in full %+v", k, at, got, want)
				}
				if got, want := indexed.NextChange(k, at), plain.NextChange(k, at); !got.Equal(want) {
					rt.Fatalf("NextChange(%s, %s): indexed %s, in full %s", k, at, got, want)
				}
			}
		}
	})
}

// BenchmarkRuleAtWithSchedules: the rule of one key in force, with 1,000
// schedules over 1,000 keys, indexed by key (as limits.Parse leaves a
// Config) and read in full; the pay path asks it on every check.
//
//	go test -run '^$' -bench RuleAtWithSchedules ./internal/ratelimit/
func BenchmarkRuleAtWithSchedules(b *testing.B) {
	t0 := time.Date(2026, 12, 24, 0, 0, 0, 0, time.UTC)
	plain := &ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{}}
	for i := range 1000 {
		k := ratelimit.Key{BizType: fmt.Sprintf("B%d", i), Channel: "ALIPAY"}
		plain.Rules[k] = ratelimit.Rule{Windows: []ratelimit.Window{{Limit: 10, Size: time.Second}}}
		plain.Schedules = append(plain.Schedules, ratelimit.Schedule{Key: k, From: t0, To: t0.Add(time.Hour),
			Rule: ratelimit.Rule{Windows: []ratelimit.Window{{Limit: 5, Size: time.Second}}}})
	}
	indexed := *plain
	indexed.IndexSchedules()
	k := ratelimit.Key{BizType: "B999", Channel: "ALIPAY"}
	at := t0.Add(time.Minute)
	for _, c := range []struct {
		name string
		cfg  *ratelimit.Config
	}{{"indexed", &indexed}, {"in full", plain}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if c.cfg.RuleAt(k, at).Windows[0].Limit != 5 {
					b.Fatal("the schedule is not in force")
				}
			}
		})
	}
}
