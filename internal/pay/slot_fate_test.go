package pay

import (
	"fmt"
	"testing"
)

// TestSlotFate is the fate of a slot on channel A for every stored state
// of its order, on A and on another channel.
func TestSlotFate(t *testing.T) {
	order := func(status Status, failure, channel string) *Order {
		return &Order{RequestID: "r", Status: status, FailureCode: failure, Channel: channel}
	}
	tests := []struct {
		order *Order
		want  Fate
	}{
		{nil, FateWait},
		{order(StatusProcessing, "", "A"), FateWait},
		{order(StatusProcessing, "", "B"), FateWait}, // its owner may yet move it to A
		{&Order{Status: StatusProcessing, Channel: "B", RoutedFrom: []RouteSkip{{Channel: "A", Reason: ReasonUnhealthy}}}, FateRelease},
		{order(StatusSucceeded, "", "A"), FateKeep},
		{order(StatusUnknown, "CHANNEL_TIMEOUT", "A"), FateKeep},
		{order(StatusFailed, "INSUFFICIENT_FUNDS", "A"), FateGiveBackAmount},
		{order(StatusFailed, "CHANNEL_ERROR", "A"), FateGiveBackAmount},
		{order(StatusFailed, FailureNotSent, "A"), FateRelease},
		{order(StatusSucceeded, "", "B"), FateRelease},
		{order(StatusFailed, "INSUFFICIENT_FUNDS", "B"), FateRelease},
		{order(StatusFailed, FailureNotSent, "B"), FateRelease},
		{order(StatusUnknown, "CHANNEL_TIMEOUT", "B"), FateRelease}, // an UNKNOWN order never moves
	}
	for _, tt := range tests {
		name := "no order"
		if tt.order != nil {
			name = fmt.Sprintf("%s on %s", StateOf(tt.order), tt.order.Channel)
		}
		if got := SlotFate("A", tt.order); got != tt.want {
			t.Errorf("%s: %s, want %s", name, got, tt.want)
		}
	}
}
