package ratelimit_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/limits"
	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
)

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// limiterOnClosedPort returns a limiter with opts over a Redis store whose
// client dials a loopback port nothing listens on, configured as
// payserver configures it (cmd/payserver redisOptions: one dial attempt
// per call).
func limiterOnClosedPort(t *testing.T, opts ratelimit.Options) *ratelimit.Limiter {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: closedPort(t), DialTimeout: 250 * time.Millisecond, MaxRetries: -1, DialerRetries: 1,
		ContextTimeoutEnabled: true, PoolTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	store, err := redisstore.New(c, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestRefusedDialIsDecidedInProcess: with Redis down (connections
// refused), a check under policy local is decided in process at once, as
// documented: a refused dial provably never ran the script, so it is never
// an unknown outcome (a 503), nor a refusal of a window that is not full.
func TestRefusedDialIsDecidedInProcess(t *testing.T) {
	l := limiterOnClosedPort(t, ratelimit.Options{Timeout: 250 * time.Millisecond})
	parsed, err := limits.Parse([]byte("limits:\n  ONLINE_PAY:ALIPAY: 100\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	l.SetConfig(cfg)
	key := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	for i := range 3 {
		start := time.Now()
		d, err := l.Check(context.Background(), ratelimit.Request{Key: key, Member: "m" + string(rune('a'+i))})
		if err != nil || !d.Allowed || d.Unknown || d.Source != ratelimit.SourceLocal {
			t.Fatalf("check %d with Redis refusing connections: allowed %v unknown %v source %s (%v); want admitted in process", i, d.Allowed, d.Unknown, d.Source, err)
		}
		if took := time.Since(start); took > 200*time.Millisecond {
			t.Errorf("check %d took %v: a refused dial should be known at once", i, took)
		}
		time.Sleep(300 * time.Millisecond) // each check past the breaker's cool-down: a probe
	}
}

// TestALimitsChangeDuringAnOutageKeepsEachMerchantsUse: while Redis
// refuses connections, a merchant's use of a window is kept in process
// like the window's own, through a limits change that keeps the window
// (here a reload of the same document): the merchant stays held to its
// limit.
func TestALimitsChangeDuringAnOutageKeepsEachMerchantsUse(t *testing.T) {
	l := limiterOnClosedPort(t, ratelimit.Options{Timeout: 250 * time.Millisecond, DisableNearCache: true})
	k := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	doc := "limits:\n  ONLINE_PAY:ALIPAY: [{limit: 100, window: 1m, perMerchant: 2}]\n"
	l.SetConfig(mustConfig(t, doc))
	ctx := context.Background()
	for i, want := range []bool{true, true, false, false, false} {
		if i == 3 {
			l.SetConfig(mustConfig(t, doc))
		}
		d, err := l.Check(ctx, ratelimit.Request{Key: k, Member: "r" + string(rune('0'+i)), Merchant: "A"})
		if err != nil {
			t.Fatal(err)
		}
		// A refusal may come from the uses kept in process alone, without
		// asking Redis (the near-cache's source).
		if d.Source == ratelimit.SourceRedis || d.Allowed != want || want && d.Source != ratelimit.SourceLocal || !d.Allowed && d.Merchant != "A" {
			t.Fatalf("check %d: allowed %v by %s (merchant %q, %d of %d), want allowed %v in process, refusals by A's limit",
				i, d.Allowed, d.Source, d.Merchant, d.Count, d.Limit, want)
		}
	}
}
