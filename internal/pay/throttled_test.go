package pay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/channel"
	"payserver/internal/pay"
	"payserver/internal/pay/paytest"
	"payserver/internal/ratelimit"
)

// throttlingChannel answers every payment THROTTLED with a wait.
type throttlingChannel struct{ wait time.Duration }

func (throttlingChannel) Code() string { return "ALIPAY" }

func (c throttlingChannel) Pay(context.Context, channel.Request) (channel.Result, error) {
	return channel.Result{}, &channel.ThrottledError{Channel: "ALIPAY", RetryAfter: c.wait}
}

// TestAThrottledPinnedPaymentIs429AndFreesItsSlot: THROTTLED means not
// processed: the order ends FAILED NOT_SENT, its slot is released, the
// answer is 429 channelThrottled with the channel's wait; a replay of the
// requestId answers the same 429 without a wait (the order is final).
func TestAThrottledPinnedPaymentIs429AndFreesItsSlot(t *testing.T) {
	lim := localLimiter(t, "limits:\n  B:ALIPAY: [{limit: 1, window: 1h}]\n")
	reg, _ := channel.NewRegistry(throttlingChannel{wait: 1500 * time.Millisecond})
	store := paytest.NewMemStore()
	svc, err := pay.NewService(store, lim, reg, pay.Options{ChannelTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Pay(context.Background(), req("t1"))
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Code != apperr.RequestLimited || ae.Details["reason"] != "channelThrottled" || ae.RetryAfter != 1500*time.Millisecond {
		t.Fatalf("first answer %v, want 429 channelThrottled with the channel's 1.5s", err)
	}
	o, err := store.Get(context.Background(), "t1")
	if err != nil || pay.StateOf(o) != pay.StateNotSent {
		t.Fatalf("order %+v %v, want FAILED NOT_SENT", o, err)
	}
	_, err = svc.Pay(context.Background(), req("t1"))
	if !errors.As(err, &ae) || ae.Code != apperr.RequestLimited || ae.Details["reason"] != "channelThrottled" || ae.RetryAfter != 0 {
		t.Fatalf("replay %v, want the same 429 without a wait", err)
	}
	_, used, err := lim.Usage(context.Background(), ratelimit.Key{BizType: "B", Channel: "ALIPAY"})
	if err != nil || used[0] != 0 {
		t.Fatalf("window holds %v (%v), want 0: a throttled payment's slot is released", used, err)
	}
}

// switchingChannel succeeds until throttle is set, then throttles without
// a wait.
type switchingChannel struct{ throttle *bool }

func (switchingChannel) Code() string { return "ALIPAY" }

func (c switchingChannel) Pay(context.Context, channel.Request) (channel.Result, error) {
	if *c.throttle {
		return channel.Result{}, &channel.ThrottledError{Channel: "ALIPAY"}
	}
	return channel.Result{Status: channel.Succeeded, TradeNo: "T"}, nil
}

// TestAThrottleLowersTheLimitEveryInstanceEnforces: five payments through,
// the sixth throttled: the limiter learns 0.7 × the six the channel was
// sent (4), below the five it holds, so the next payment is refused 429
// with the learned limit and the configured one, before any call.
func TestAThrottleLowersTheLimitEveryInstanceEnforces(t *testing.T) {
	lim := localLimiter(t, "limits:\n  B:ALIPAY: [{limit: 10, window: 1h}]\n")
	throttle := false
	reg, _ := channel.NewRegistry(switchingChannel{&throttle})
	svc, err := pay.NewService(paytest.NewMemStore(), lim, reg, pay.Options{ChannelTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s1", "s2", "s3", "s4", "s5"} {
		if o, err := svc.Pay(context.Background(), req(id)); err != nil || o.Status != pay.StatusSucceeded {
			t.Fatalf("%s: %v %v", id, o, err)
		}
	}
	throttle = true
	if _, err := svc.Pay(context.Background(), req("s6")); apperr.CodeOf(err) != apperr.RequestLimited {
		t.Fatalf("throttled: %v, want 429", err)
	}
	throttle = false
	_, err = svc.Pay(context.Background(), req("s7"))
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Code != apperr.RequestLimited || ae.Details["learned"] != true || ae.Details["limit"] != int64(4) || ae.Details["configuredLimit"] != int64(10) {
		t.Fatalf("after the throttle: %v %+v, want 429 by the learned limit 4 of 10", err, ae)
	}
}
