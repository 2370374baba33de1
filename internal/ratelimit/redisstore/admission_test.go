package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"payserver/internal/ratelimit"

	"github.com/redis/go-redis/v9"

	"payserver/internal/testutil"
)

// redisTime reads Redis TIME in µs.
func redisTime(t *testing.T, c redis.UniversalClient) int64 {
	t.Helper()
	now, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMicro()
}

// assertHeld checks, on Redis, that every key holds member: a sorted set
// with the score at (µs), or a hash with the amount.
func assertHeld(t *testing.T, c redis.UniversalClient, keys []string, member string, at, amount int64) {
	t.Helper()
	ctx := context.Background()
	for _, k := range keys {
		switch typ := c.Type(ctx, k).Val(); typ {
		case "zset":
			score, err := c.ZScore(ctx, k, member).Result()
			if err != nil {
				t.Fatalf("ZSCORE %s %s: %v", k, member, err)
			}
			if int64(score) != at {
				t.Fatalf("ZSCORE %s %s = %d, want the admission time %d", k, member, int64(score), at)
			}
		case "hash":
			v, err := c.HGet(ctx, k, member).Result()
			if err != nil {
				t.Fatalf("HGET %s %s: %v", k, member, err)
			}
			if v != strconv.FormatInt(amount, 10) {
				t.Fatalf("HGET %s %s = %s, want its amount %d", k, member, v, amount)
			}
		default:
			t.Fatalf("window key %s is a %q, want a zset or a hash that holds %s", k, typ, member)
		}
	}
}

// TestAdmissionRecordOnRedis: on a real Redis, an admitted decision carries
// the Redis TIME its script read (between TIME read before and after the
// call, and exactly the score the member got), the exact Redis keys of the
// windows that count it (its key's sliding count, amount and calendar
// windows, its channel-wide window and its own use of that window's
// reservation, not the other name's, only read), each holding it; a
// duplicate carries the time it was first admitted; a refusal carries
// neither.
func TestAdmissionRecordOnRedis(t *testing.T) {
	c := testutil.MustRedis(t)
	s, _ := New(c, Options{Prefix: "test:adm:"})
	ch := testutil.UniqueName("C")
	cfg := &ratelimit.Config{Version: "0123456789abcdef0123456789abcdef", Rules: map[ratelimit.Key]ratelimit.Rule{
		{BizType: "PAY", Channel: ch}: {Windows: []ratelimit.Window{
			{Limit: 5, Size: 10 * time.Second}, {Limit: 1000, Size: time.Minute, Amount: true}, {Limit: 5, Calendar: dayUTC}}},
		{BizType: "SOLO", Channel: ch}: {Windows: []ratelimit.Window{{Limit: 1, Size: time.Second}}},
		ratelimit.ChannelWide(ch):      {Windows: []ratelimit.Window{{Limit: 10, Size: 10 * time.Second}}, Reserve: []map[string]int64{{"PAY": 1, "REFUND": 2}}},
	}}
	l := mustLimiter(t, s, ratelimit.Options{Timeout: 5 * time.Second, DisableNearCache: true}, cfg)
	r := ratelimit.Request{Key: ratelimit.Key{BizType: "PAY", Channel: ch}, Member: "m1", Amount: 100, Currency: "CNY"}

	before := redisTime(t, c)
	d := mustDecide(t, l, r)
	after := redisTime(t, c)
	if !d.Allowed || d.Source != ratelimit.SourceRedis {
		t.Fatalf("got %+v, want admitted by Redis", d)
	}
	at := d.AdmittedAt.UnixMicro()
	if at < before || at > after || d.AdmittedAt.Nanosecond()%1000 != 0 {
		t.Fatalf("AdmittedAt %d µs, want Redis TIME of the call, in [%d, %d] µs", at, before, after)
	}
	p := "test:adm:{" + ch + "}:"
	want := []string{p + "PAY:10000", p + "PAY:a60000", p + "PAY:day.0000.UTC", p + "*:10000", p + "*PAY:10000"}
	if !slices.Equal(d.WindowKeys, want) {
		t.Fatalf("WindowKeys %q, want %q", d.WindowKeys, want)
	}
	assertHeld(t, c, d.WindowKeys, r.Member, at, r.Amount)
	if n := c.Exists(context.Background(), p+"*REFUND:10000").Val(); n != 0 {
		t.Fatalf("the other name's reservation window exists: it is only read")
	}

	time.Sleep(5 * time.Millisecond)
	dup := mustDecide(t, l, r)
	if !dup.Allowed || !dup.Duplicate || !dup.AdmittedAt.Equal(d.AdmittedAt) || !slices.Equal(dup.WindowKeys, want) {
		t.Fatalf("retry: got %+v, want a duplicate admitted at %v (its first admission) in %q", dup, d.AdmittedAt, want)
	}

	solo := ratelimit.Key{BizType: "SOLO", Channel: ch}
	mustDecide(t, l, ratelimit.Request{Key: solo, Member: "s1"})
	if refused := mustDecide(t, l, ratelimit.Request{Key: solo, Member: "s2"}); refused.Allowed || !refused.AdmittedAt.IsZero() || refused.WindowKeys != nil {
		t.Fatalf("refusal: got %+v, want no admission time and no window keys", refused)
	}

	if d.LimitsVersion != cfg.Version {
		t.Fatalf("LimitsVersion %q, want the ratelimit.Config's Version %s", d.LimitsVersion, cfg.Version)
	}
}

// TestDuplicateInCalendarWindowsOnlyIsTimedNow: calendar windows keep
// amounts, not times, so a retry held by calendar windows only carries the
// time of the retry's call.
func TestDuplicateInCalendarWindowsOnlyIsTimedNow(t *testing.T) {
	c := testutil.MustRedis(t)
	s, _ := New(c, Options{Prefix: "test:adm:"})
	ch := testutil.UniqueName("C")
	l := mustLimiter(t, s, ratelimit.Options{Timeout: 5 * time.Second}, &ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{
		ratelimit.ResolveKey(ch): {Windows: []ratelimit.Window{{Limit: 5, Calendar: dayUTC}}}}})
	r := ratelimit.Request{Key: ratelimit.ResolveKey(ch), Member: "q1"}
	first := mustDecide(t, l, r)
	time.Sleep(5 * time.Millisecond)
	before := redisTime(t, c)
	again := mustDecide(t, l, r)
	after := redisTime(t, c)
	if at := again.AdmittedAt.UnixMicro(); !again.Duplicate || at < before || at > after || !again.AdmittedAt.After(first.AdmittedAt) {
		t.Fatalf("retry: got %+v, want a duplicate timed by its own call, in [%d, %d] µs", again, before, after)
	}
	want := []string{"test:adm:{" + ch + "}:RESOLVE:day.0000.UTC"}
	if !slices.Equal(again.WindowKeys, want) {
		t.Fatalf("WindowKeys %q, want %q", again.WindowKeys, want)
	}
	assertHeld(t, c, again.WindowKeys, r.Member, 0, 0)
}

// TestScriptCallSharesOneTime: every member of one script call (a
// coalesced batch) is admitted at the one Redis TIME the call read, the
// first integer of the reply (the second counts the windows bound by a
// learned limit); a refused member has no time.
func TestScriptCallSharesOneTime(t *testing.T) {
	c := testutil.MustRedis(t)
	s, _ := New(c, Options{Prefix: "test:adm:"})
	ws := ratelimit.KeyWindows(ratelimit.Key{BizType: testutil.UniqueName("B"), Channel: "X"}, []ratelimit.Window{{Limit: 2, Size: time.Minute}})
	members := []checkMember{{id: "a"}, {id: "b"}, {id: "c"}}
	before := redisTime(t, c)
	reply, err := s.runCheck(context.Background(), ws, s.checkKeys(ws), checkArgs(ws, members...))
	after := redisTime(t, c)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]ratelimit.StoreResult, len(members))
	if err := parseCheckReply(reply, len(ws), got); err != nil {
		t.Fatal(err)
	}
	if len(reply) != 2+len(members)*(4+len(ws)) {
		t.Fatalf("reply of %d integers, want two for the call (its time, no learned limit) and %d per member", len(reply), 4+len(ws))
	}
	if reply[0] < before || reply[0] > after {
		t.Fatalf("the call's time %d µs, want Redis TIME in [%d, %d]", reply[0], before, after)
	}
	if !got[0].Allowed || !got[1].Allowed || got[2].Allowed {
		t.Fatalf("got %+v, want a and b admitted, c refused", got)
	}
	for i, m := range members[:2] {
		if got[i].At.UnixMicro() != reply[0] {
			t.Fatalf("%s admitted at %v, want the call's time %d µs", m.id, got[i].At, reply[0])
		}
		assertHeld(t, c, []string{s.RedisKey(ws[0])}, m.id, reply[0], 0)
	}
	if !got[2].At.IsZero() {
		t.Fatalf("refused c has a time: %v", got[2].At)
	}
}

// TestCoalescedChecksShareTheirCallsTime: through the coalescer, 64
// concurrent callers' admissions carry no more distinct times than there
// were script calls (members of one call share its time), and each is the
// score Redis recorded.
func TestCoalescedChecksShareTheirCallsTime(t *testing.T) {
	c := testutil.MustRedis(t)
	s, _ := New(c, Options{Prefix: "test:adm:", Coalesce: true})
	ws := ratelimit.KeyWindows(ratelimit.Key{BizType: testutil.UniqueName("B"), Channel: "X"}, []ratelimit.Window{{Limit: 100_000, Size: time.Minute}})
	const callers, each = 64, 10
	ats := make([][]time.Time, callers)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				res, err := s.Check(context.Background(), ws, fmt.Sprintf("m%d-%d", g, i), 0)
				if err != nil || !res.Allowed {
					t.Errorf("check: %+v, %v", res, err)
					return
				}
				ats[g] = append(ats[g], res.At)
			}
		}()
	}
	wg.Wait()
	calls, checks := s.CoalesceStats()
	distinct := map[int64]bool{}
	for g := range callers {
		for i, at := range ats[g] {
			distinct[at.UnixMicro()] = true
			score := c.ZScore(context.Background(), s.RedisKey(ws[0]), fmt.Sprintf("m%d-%d", g, i)).Val()
			if int64(score) != at.UnixMicro() {
				t.Fatalf("m%d-%d admitted at %d µs, recorded at %d", g, i, at.UnixMicro(), int64(score))
			}
		}
	}
	if uint64(len(distinct)) > calls {
		t.Fatalf("%d distinct admission times from %d script calls (%d checks): a call's members must share its time", len(distinct), calls, checks)
	}
	t.Logf("%d checks in %d calls, %d distinct times", checks, calls, len(distinct))
}

// TestDrivenTimeIsAdmissionTime: the time tests pass the script (ARGV[2])
// is the admission time, and a duplicate keeps its first one.
func TestDrivenTimeIsAdmissionTime(t *testing.T) {
	c := testutil.MustRedis(t)
	s, _ := New(c, Options{Prefix: "test:adm:"})
	ws := ratelimit.KeyWindows(ratelimit.Key{BizType: testutil.UniqueName("B"), Channel: "X"}, []ratelimit.Window{{Limit: 5, Size: time.Minute}})
	t0 := time.UnixMicro(1_800_000_000_123_456)
	check := func(at time.Time, m string) ratelimit.StoreResult {
		t.Helper()
		reply, err := s.runCheck(context.Background(), ws, s.checkKeys(ws), checkArgsAt(micros(at), at, ws, checkMember{id: m}))
		if err != nil {
			t.Fatal(err)
		}
		out := make([]ratelimit.StoreResult, 1)
		if err := parseCheckReply(reply, len(ws), out); err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	if got := check(t0, "a"); !got.At.Equal(t0) {
		t.Fatalf("a at %v, want the driven time %v", got.At, t0)
	}
	t1 := t0.Add(5 * time.Second)
	if got := check(t1, "a"); !got.Duplicate || !got.At.Equal(t0) {
		t.Fatalf("a again at %v: %+v, want a duplicate first admitted at %v", t1, got, t0)
	}
	if got := check(t1, "b"); got.Duplicate || !got.At.Equal(t1) {
		t.Fatalf("b at %v: %+v, want admitted at %v", t1, got, t1)
	}
}

// dayUTC is the calendar of a day window from 00:00 UTC.
var dayUTC = ratelimit.Calendar{Unit: ratelimit.CalendarDay, Zone: time.UTC}

// mustLimiter returns a Limiter on store with cfg in force.
func mustLimiter(t *testing.T, store ratelimit.Store, opts ratelimit.Options, cfg *ratelimit.Config) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(cfg)
	return l
}

func mustDecide(t *testing.T, l *ratelimit.Limiter, r ratelimit.Request) ratelimit.Decision {
	t.Helper()
	d, err := l.Check(context.Background(), r)
	if err != nil {
		t.Fatalf("Check(%+v): %v", r, err)
	}
	return d
}
