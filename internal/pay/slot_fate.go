package pay

import "payserver/internal/ratelimit"

// Fate is what becomes of the limiter slot a payment holds on one key,
// once the order holding its requestId is known.
type Fate int

// The fates of a slot.
const (
	// FateWait: a call under the slot may still happen (the order is
	// PROCESSING, or not known yet); keep the slot and decide later.
	FateWait Fate = iota
	// FateKeep: the channel may have been paid under the slot (SUCCEEDED,
	// or UNKNOWN, on that key): it stays counted.
	FateKeep
	// FateGiveBackAmount: the channel refused the payment (FAILED on that
	// key): the call counts, its amount goes back to the amount caps.
	FateGiveBackAmount
	// FateRelease: no call can happen under the slot (NOT_SENT on that
	// key, the order ended elsewhere, or the slot is another payment's
	// attempt at the requestId than the one holding it).
	FateRelease
)

func (f Fate) String() string {
	return [...]string{"wait", "keep", "give back the amount", "release"}[f]
}

// Where says which records of a slot's member a release or a give-back
// takes away. A member's records are its entries in the windows of the
// slot's key and of the key's channel-wide key, in the shared store and in
// each instance's in-process windows; one requestId may have several
// admissions there (retries, duplicates, instances cut off from Redis).
type Where int

// The places a settled slot is given back from.
const (
	// Everywhere: every record of the member under the slot's key and its
	// channel-wide key, in process and shared. For a slot no call can
	// follow under for the requestId, whoever recorded it.
	Everywhere Where = iota
	// OwnRecord: this admission's own record only. An admission decided
	// in process during an outage (Slot.InProcess) was never in the shared
	// store: the shared store's record of the member there is another
	// admission's, possibly the paid one's, and stays. A shared admission
	// leaves an in-process record of the member for another amount, which
	// is one this instance decided while cut off.
	OwnRecord
	// OwnKey: the windows of the slot's own key only (and its own use of
	// reservations), in every store; not the channel-wide windows, where
	// the order holding the requestId (another bizType on the same
	// channel) counts the same member.
	OwnKey
)

func (w Where) String() string {
	return [...]string{"everywhere", "own record", "own key"}[w]
}

// Decision is a slot's fate and where it is carried out.
type Decision struct {
	Fate  Fate
	Where Where
}

// Slot is what a payment's flow knows of one slot it took: its key, the
// amount and currency its check counted (the amount is its identity with
// the limiter), the order it claimed the
// requestId with (its OrderNo; empty when it claimed none, as a check
// whose answer was lost), and whether its record was decided in process
// and kept there only (ratelimit.Hold.InProcess).
type Slot struct {
	Key       ratelimit.Key
	Amount    int64
	Currency  string
	OrderNo   string
	InProcess bool
}

// DecideSlot decides the fate of slot s from o, the order holding its
// requestId as stored (nil: not known yet). Every place that ends a
// payment, or learns how it ended, settles its slots through it. The
// rules, in order:
//
//   - No order known: wait.
//   - The channel the slot is on reported the payment paid against a
//     final order (a discrepancy): keep, whatever the order says.
//   - o on another channel: wait while it is PROCESSING and its owner may
//     yet move it to s's channel (a routed payment never goes back to a
//     candidate it left); otherwise no call can follow under s's key for
//     the requestId: release everywhere.
//   - o on s's channel for another amount: s is an attempt of another
//     payment with the same requestId, which lost the claim. The limiter
//     refuses a member held for another amount, so a record of the member
//     for s's amount is s's alone, and one for o's amount is the
//     winner's: release the records for s's amount, and only them. An
//     admission decided in process releases its in-process record only
//     (the shared record of the member is the winner's); a shared one, or
//     a check whose answer was lost (which may have recorded nothing, the
//     store having refused it for the winner's record), releases the
//     member's records for its amount, in the shared store and in
//     process, never one for the winner's.
//   - o on s's channel for another bizType, same amount: its call is made
//     under its own key, never s's, and it counts the same member in the
//     channel-wide windows. Release s's own key's windows, at once.
//   - o on s's key, and s is o's own slot or another attempt with the same
//     amount (the limiter's identity of a member is its requestId and
//     amount, so such an attempt shares o's record, whatever its currency
//     or other fields): the order's state decides, everywhere:
//     PROCESSING waits, SUCCEEDED and UNKNOWN keep, FAILED gives the
//     amount back, NOT_SENT releases.
func DecideSlot(s Slot, o *Order) Decision {
	if o == nil {
		return Decision{Fate: FateWait}
	}
	if d := o.Discrepancy; d != nil && d.Reported == string(StatusSucceeded) && d.Channel == s.Key.Channel &&
		o.BizType == s.Key.BizType && o.Amount == s.Amount {
		// The channel says it paid under this slot, whatever the order
		// says: money moved, the slot stays counted.
		return Decision{Fate: FateKeep}
	}
	state := StateOf(o)
	switch {
	case o.Channel != s.Key.Channel:
		if state == StateProcessing && !routedFrom(o, s.Key.Channel) {
			return Decision{Fate: FateWait}
		}
		return Decision{Fate: FateRelease, Where: Everywhere}
	case o.OrderNo != s.OrderNo && o.Amount != s.Amount:
		return Decision{Fate: FateRelease, Where: OwnRecord}
	case o.BizType != s.Key.BizType:
		return Decision{Fate: FateRelease, Where: OwnKey}
	}
	switch state {
	case StateSucceeded, StateUnknown:
		return Decision{Fate: FateKeep}
	case StateFailed:
		return Decision{Fate: FateGiveBackAmount, Where: Everywhere}
	case StateNotSent:
		return Decision{Fate: FateRelease, Where: Everywhere}
	}
	return Decision{Fate: FateWait}
}

// slotOf is what mine's flow knows of the slot hold keeps for it. A nil
// mine is a slot of the order it is settled against (o's own).
func slotOf(hold ratelimit.Hold, mine, o *Order) Slot {
	if mine == nil {
		mine = o
	}
	s := Slot{Key: hold.Key, InProcess: hold.InProcess()}
	if mine != nil {
		s.Amount, s.Currency, s.OrderNo = mine.Amount, mine.Currency, mine.OrderNo
	}
	return s
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
	return ratelimit.HoldOf(key, o.RequestID).OfMerchant(o.MerchantID)
}

// where is hold, the slot s keeps, narrowed to the records w names.
func where(hold ratelimit.Hold, s Slot, w Where) ratelimit.Hold {
	switch w {
	case Everywhere:
		return hold.Everywhere()
	case OwnRecord:
		if hold.InProcess() {
			return hold
		}
		return hold.WithAmount(s.Amount).OwnRecord()
	case OwnKey:
		if hold.InProcess() {
			// Decided in process: every in-process record, the
			// channel-wide one included, is this admission's own; the
			// shared store never recorded it.
			return hold
		}
		return hold.Everywhere().OwnKey()
	}
	return hold
}
