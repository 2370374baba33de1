package pay

import (
	"testing"

	"payserver/internal/ratelimit"
)

// TestDecideSlot is the fate of a slot on B:A for every stored state of the
// order holding its requestId: its own order, another attempt of the same
// payment, another payment's (another amount, currency or bizType), and
// an order on another channel.
func TestDecideSlot(t *testing.T) {
	mine := Slot{Key: ratelimit.Key{BizType: "B", Channel: "A"}, Amount: 100, Currency: "CNY", OrderNo: "O1"}
	order := func(status Status, failure, channel string) *Order {
		return &Order{RequestID: "r", OrderNo: "O1", BizType: "B", Amount: 100, Currency: "CNY", Status: status, FailureCode: failure, Channel: channel}
	}
	other := func(o *Order, change func(*Order)) *Order {
		c := *o
		c.OrderNo = "O2"
		change(&c)
		return &c
	}
	inProcess := mine
	inProcess.InProcess = true
	keep, wait := Decision{Fate: FateKeep}, Decision{Fate: FateWait}
	release := Decision{Fate: FateRelease, Where: Everywhere}
	giveBack := Decision{Fate: FateGiveBackAmount, Where: Everywhere}
	tests := []struct {
		name  string
		slot  Slot
		order *Order
		want  Decision
	}{
		{"no order", mine, nil, wait},
		{"processing here", mine, order(StatusProcessing, "", "A"), wait},
		{"processing elsewhere", mine, order(StatusProcessing, "", "C"), wait}, // its owner may yet move it to A
		{"processing elsewhere, routed from here", mine, &Order{OrderNo: "O1", Status: StatusProcessing, Channel: "C", RoutedFrom: []RouteSkip{{Channel: "A", Reason: ReasonUnhealthy}}}, release},
		{"succeeded", mine, order(StatusSucceeded, "", "A"), keep},
		{"unknown", mine, order(StatusUnknown, "CHANNEL_TIMEOUT", "A"), keep},
		{"declined", mine, order(StatusFailed, "INSUFFICIENT_FUNDS", "A"), giveBack},
		{"channel error", mine, order(StatusFailed, "CHANNEL_ERROR", "A"), giveBack},
		{"not sent", mine, order(StatusFailed, FailureNotSent, "A"), release},
		{"succeeded elsewhere", mine, order(StatusSucceeded, "", "C"), release},
		{"declined elsewhere", mine, order(StatusFailed, "INSUFFICIENT_FUNDS", "C"), release},
		{"not sent elsewhere", mine, order(StatusFailed, FailureNotSent, "C"), release},
		{"unknown elsewhere", mine, order(StatusUnknown, "CHANNEL_TIMEOUT", "C"), release}, // an UNKNOWN order never moves
		// Another attempt of the same payment follows the order's fate.
		{"same payment's order succeeded", mine, other(order(StatusSucceeded, "", "A"), func(*Order) {}), keep},
		{"same payment's order processing", mine, other(order(StatusProcessing, "", "A"), func(*Order) {}), wait},
		{"same payment's order declined", mine, other(order(StatusFailed, "X", "A"), func(*Order) {}), giveBack},
		{"same payment's order succeeded, decided in process", inProcess, other(order(StatusSucceeded, "", "A"), func(*Order) {}), keep},
		// Another payment's claim: this attempt's own record goes.
		{"another amount's order succeeded", mine, other(order(StatusSucceeded, "", "A"), func(o *Order) { o.Amount = 200 }), Decision{Fate: FateRelease, Where: OwnRecord}},
		{"another amount's order processing", mine, other(order(StatusProcessing, "", "A"), func(o *Order) { o.Amount = 200 }), Decision{Fate: FateRelease, Where: OwnRecord}},
		// The limiter's identity is the amount: another currency for the
		// same amount is the same record.
		{"another currency's order succeeded", mine, other(order(StatusSucceeded, "", "A"), func(o *Order) { o.Currency = "USD" }), keep},
		{"another currency's order processing", mine, other(order(StatusProcessing, "", "A"), func(o *Order) { o.Currency = "USD" }), wait},
		{"another amount's order, decided in process", inProcess, other(order(StatusSucceeded, "", "A"), func(o *Order) { o.Amount = 200 }), Decision{Fate: FateRelease, Where: OwnRecord}},
		// Another bizType on the channel: its own key's windows only.
		{"another bizType's order succeeded", mine, other(order(StatusSucceeded, "", "A"), func(o *Order) { o.BizType = "D" }), Decision{Fate: FateRelease, Where: OwnKey}},
		{"another bizType's order processing", mine, other(order(StatusProcessing, "", "A"), func(o *Order) { o.BizType = "D" }), Decision{Fate: FateRelease, Where: OwnKey}},
		// The channel reported paid what the order closed: the slot stays.
		{"not sent, then reported paid here", mine, func() *Order {
			o := order(StatusFailed, FailureNotSent, "A")
			o.Discrepancy = &Discrepancy{Channel: "A", Reported: "SUCCEEDED"}
			return o
		}(), keep},
		{"routed away, then reported paid here", mine, func() *Order {
			o := order(StatusSucceeded, "", "C")
			o.RoutedFrom = []RouteSkip{{Channel: "A", Reason: ReasonUnhealthy}}
			o.Discrepancy = &Discrepancy{Channel: "A", Reported: "SUCCEEDED"}
			return o
		}(), keep},
		{"not sent, reported paid elsewhere", mine, func() *Order {
			o := order(StatusFailed, FailureNotSent, "A")
			o.Discrepancy = &Discrepancy{Channel: "C", Reported: "SUCCEEDED"}
			return o
		}(), release},
		// A check whose answer was lost claimed no order.
		{"lost answer, same amount", Slot{Key: mine.Key, Amount: 100, Currency: "CNY"}, order(StatusSucceeded, "", "A"), keep},
		{"lost answer, another amount", Slot{Key: mine.Key, Amount: 300, Currency: "CNY"}, order(StatusSucceeded, "", "A"), Decision{Fate: FateRelease, Where: OwnRecord}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DecideSlot(tt.slot, tt.order); got != tt.want {
				t.Errorf("got %s %s, want %s %s", got.Fate, got.Where, tt.want.Fate, tt.want.Where)
			}
		})
	}
}
