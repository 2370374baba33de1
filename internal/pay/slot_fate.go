package pay

import (
	"context"
	"log/slog"
	"time"

	"payserver/internal/ratelimit"
)

// Fate is what becomes of the limiter slot a payment holds on one channel,
// once its order's state is known.
type Fate int

// The fates of a slot.
const (
	// FateWait: a call on the channel may still happen (the order is
	// PROCESSING, or not known yet); keep the slot and decide later, or
	// let it free itself when its window passes.
	FateWait Fate = iota
	// FateKeep: the channel may have been paid under the slot (SUCCEEDED,
	// or UNKNOWN, on that channel): it stays counted.
	FateKeep
	// FateGiveBackAmount: the channel refused the payment (FAILED on that
	// channel): the call counts, its amount goes back to the amount caps.
	FateGiveBackAmount
	// FateRelease: no call can happen under the slot (NOT_SENT on that
	// channel, or the order ended on another channel, where an UNKNOWN
	// order stays too: only a PROCESSING one moves).
	FateRelease
)

func (f Fate) String() string {
	return [...]string{"wait", "keep", "give back the amount", "release"}[f]
}

// SlotFate decides the fate of the slot a payment holds on channel from
// its order as stored: every place that ends a payment, or learns how it
// ended, settles its slots through it. A nil order (not known yet) waits.
func SlotFate(channel string, o *Order) Fate {
	if o == nil {
		return FateWait
	}
	state := StateOf(o)
	switch {
	case state == StateProcessing && o.Channel != channel && routedFrom(o, channel):
		// A routed payment never goes back to a candidate it left.
		return FateRelease
	case state == StateProcessing:
		// Its owner calls o.Channel, or may yet move it to channel.
		return FateWait
	case o.Channel != channel:
		return FateRelease
	}
	switch state {
	case StateSucceeded, StateUnknown:
		return FateKeep
	case StateFailed:
		return FateGiveBackAmount
	case StateNotSent:
		return FateRelease
	}
	return FateWait
}

// holdFor is the slot o's payment holds on key: the one its flow took,
// else the one its admission record names (the windows that recorded it,
// whatever the limits say now), else the member on key with its windows
// unknown (ratelimit.HoldOf): a slot on a channel the order is not on.
func holdFor(key ratelimit.Key, o *Order) ratelimit.Hold {
	if o.hold.Key == key && o.hold.Member == o.RequestID && o.hold.Known() {
		return o.hold
	}
	if o.BizType == key.BizType && o.Channel == key.Channel {
		if h, err := ratelimit.HoldFromWindowKeys(key, o.RequestID, o.Admission.Keys); err == nil {
			return h
		}
	}
	return ratelimit.HoldOf(key, o.RequestID)
}

// settleSlot gives the slot hold keeps for o's payment its fate (SlotFate
// on hold's channel). Releasing and giving back are idempotent, so settling
// twice (the owner and a notification) changes nothing more.
func settleSlot(ctx context.Context, limiter Limiter, hold ratelimit.Hold, o *Order, log *slog.Logger) {
	key := hold.Key
	fate := SlotFate(key.Channel, o)
	if fate != FateRelease && fate != FateGiveBackAmount {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	// No call can follow under the key for this requestId: every record
	// of it there goes, in process and shared.
	hold = hold.Everywhere()
	var err error
	if fate == FateRelease {
		err = limiter.Release(sctx, hold)
	} else {
		err = limiter.ReleaseAmount(sctx, hold)
	}
	if err != nil {
		log.Warn("could not settle a payment's limiter slot; it frees itself when its window passes",
			"key", key.String(), "requestId", o.RequestID, "fate", fate.String(), "err", err)
	}
}
