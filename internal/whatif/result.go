// Package whatif replays the decision log (internal/decisionlog) through the
// model of the limiter's rules (ratelimit.Model), the oracle every store is
// tested against, under a proposed limits document: what it would have
// admitted and refused of the traffic payserver actually saw, and whom it
// would have refused. Each replay also takes every decision again under the
// document it was taken under (limit_documents, by the version each
// decision carries) and says which share it reproduces: its fidelity.
package whatif

import "time"

// Result is a replay's answer: the JSON of `payserver what-if --json` and
// POST /limits/what-if.
type Result struct {
	From            time.Time   `json:"from"`
	To              time.Time   `json:"to"`
	ProposedVersion string      `json:"proposedVersion"`
	Keys            []KeyResult `json:"keys"`
	// Fidelity is the share of the recorded decisions the replay under
	// the documents in force reproduces, outside the decisions the
	// fallback took (sources local and fail_open) or the store could not
	// take (unavailable); 1 when there are none to check.
	Fidelity float64 `json:"fidelity"`
	// Checked is how many decisions fidelity was measured on.
	Checked int64 `json:"-"`
	// Differences are the keys and minutes whose recorded decisions the
	// replay under the documents in force did not reproduce, the most
	// first, each with a reason; at most maxDifferences.
	Differences []Difference `json:"-"`
}

// Counts are admissions and refusals.
type Counts struct {
	Admitted int64 `json:"admitted"`
	Refused  int64 `json:"refused"`
}

// KeyResult is one key's replay.
type KeyResult struct {
	Key           string     `json:"key"`
	Offered       int64      `json:"offered"`
	Actual        Counts     `json:"actual"`
	Proposed      Counts     `json:"proposed"`
	NewlyRefused  int64      `json:"newlyRefused"`
	NewlyAdmitted int64      `json:"newlyAdmitted"`
	Merchants     []Merchant `json:"merchants"`
	Minutes       []Minute   `json:"minutes"`
}

// Merchant is a merchant the proposal refuses newly.
type Merchant struct {
	MerchantID   string `json:"merchantId"`
	NewlyRefused int64  `json:"newlyRefused"`
}

// Minute is one minute of a key's traffic.
type Minute struct {
	At               time.Time `json:"at"`
	Offered          int64     `json:"offered"`
	ActualAdmitted   int64     `json:"actualAdmitted"`
	ProposedAdmitted int64     `json:"proposedAdmitted"`
}

// Busiest returns the minute with the most offered, the first of equals;
// false when there is none.
func (k KeyResult) Busiest() (Minute, bool) {
	var best Minute
	for _, m := range k.Minutes {
		if m.Offered > best.Offered {
			best = m
		}
	}
	return best, best.Offered > 0
}

// Difference is one key and minute where the replay under the documents
// in force did not reproduce what was recorded.
type Difference struct {
	Key    string
	Minute time.Time
	// Admitted counts decisions recorded admitted that the replay
	// refused; Refused those recorded refused that it admitted.
	Admitted, Refused int64
	Why               string
}
