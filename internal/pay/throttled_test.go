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
