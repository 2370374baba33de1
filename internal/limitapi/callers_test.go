package limitapi

import (
	"errors"
	"testing"

	"payserver/internal/ratelimit"
)

// TestCheckCounterCountsALostAnswerAsFailed: a check whose limiter answer
// was lost is answered 503, never 429: the callers report counts it as
// failed, as it counts a limiter error, not as limited.
func TestCheckCounterCountsALostAnswerAsFailed(t *testing.T) {
	tally := NewTally()
	c := CheckCounter{Observer: tally}
	req := ratelimit.Request{Caller: "pay", Key: ratelimit.Key{BizType: "P", Channel: "C"}}
	c.Checked(req, ratelimit.Decision{Allowed: true}, nil)
	c.Checked(req, ratelimit.Decision{}, nil)
	c.Checked(req, ratelimit.Decision{Unknown: true}, nil)
	c.Checked(req, ratelimit.Decision{}, errors.New("ratelimit: limiter store unavailable"))
	got := tally.Snapshot()
	if len(got) != 1 || got[0].Acquired != 1 || got[0].Limited != 1 || got[0].Failed != 2 {
		t.Fatalf("tally %+v, want pay: 1 acquired, 1 limited, 2 failed", got)
	}
}
