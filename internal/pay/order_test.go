package pay_test

import (
	"fmt"
	"testing"

	"payserver/internal/pay"
)

// TestOrderTransitions checks the state machine over every (from, to) pair
// against the table written out here, which docs/DESIGN.md repeats: an
// order is claimed once, finished once by its claimant (SUCCEEDED, FAILED,
// NOT_SENT or UNKNOWN), and only UNKNOWN is finished again.
func TestOrderTransitions(t *testing.T) {
	const (
		N = pay.StateNone
		P = pay.StateProcessing
		S = pay.StateSucceeded
		F = pay.StateFailed
		X = pay.StateNotSent
		U = pay.StateUnknown
	)
	allowed := map[[2]pay.State]bool{
		{N, P}: true,
		{P, S}: true, {P, F}: true, {P, X}: true, {P, U}: true,
		{U, S}: true, {U, F}: true, {U, X}: true, {U, U}: true,
	}
	if len(pay.States) != 6 {
		t.Fatalf("%d states, this table knows 6: extend it", len(pay.States))
	}
	for _, from := range pay.States {
		for _, to := range pay.States {
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
				if got, want := pay.Allowed(from, to), allowed[[2]pay.State{from, to}]; got != want {
					t.Fatalf("Allowed(%s, %s) = %v, want %v", from, to, got, want)
				}
			})
		}
	}
}

func TestStateOf(t *testing.T) {
	tests := []struct {
		order *pay.Order
		want  pay.State
	}{
		{nil, pay.StateNone},
		{&pay.Order{Status: pay.StatusProcessing}, pay.StateProcessing},
		{&pay.Order{Status: pay.StatusSucceeded}, pay.StateSucceeded},
		{&pay.Order{Status: pay.StatusFailed, FailureCode: "INSUFFICIENT_FUNDS"}, pay.StateFailed},
		{&pay.Order{Status: pay.StatusFailed, FailureCode: "CHANNEL_ERROR"}, pay.StateFailed},
		{&pay.Order{Status: pay.StatusFailed, FailureCode: pay.FailureNotSent}, pay.StateNotSent},
		{&pay.Order{Status: pay.StatusUnknown, FailureCode: "CHANNEL_TIMEOUT"}, pay.StateUnknown},
	}
	for _, tc := range tests {
		name := "nil"
		if tc.order != nil {
			name = string(tc.order.Status) + "/" + tc.order.FailureCode
		}
		t.Run(name, func(t *testing.T) {
			if got := pay.StateOf(tc.order); got != tc.want {
				t.Fatalf("StateOf = %s, want %s", got, tc.want)
			}
		})
	}
}
