package ratelimit

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Hold is the place an admitted member holds: its key, its member and the
// exact windows that recorded it, whatever the limits say by the time it
// is given back (like x/time/rate's Reservation). Limiter.Release and
// ReleaseAmount take one. A Hold with no windows (Known false) names only
// the key and member: releasing it gives the member back from the windows
// the limits in force give the key then, which is all a caller that never
// saw the admission (an acquisition released through the limits API by its
// requestId) can ask for.
type Hold struct {
	Key    Key
	Member string
	// windows are the windows of the check that admitted Member; those
	// read only for other bizTypes' reservations (TrackOther) are skipped
	// when releasing. Shared with the check's plan, never changed.
	windows []KeyWindow
	// merchant is the merchant the member was checked for (OfMerchant).
	merchant string
	// inProcess: the admission was decided in process during an outage
	// (SourceLocal, an outcome known, the member new to the in-process
	// windows): this admission is not in the shared store, so releasing
	// the hold gives back the in-process windows only, and a record of
	// the same member there, which may be another instance's admission
	// (for another amount, of a payment it made), is left alone.
	// Everywhere clears it, for a release that no record of the member on
	// the key may outlive.
	inProcess bool
	// ownKey keeps the release to the windows of Key itself and its own
	// use of reservations (TrackOwn), leaving the channel-wide windows:
	// OwnKey.
	ownKey bool
	// amount is what the admission was checked for: with the member, its
	// identity in the windows.
	amount int64
	// ownRecord keeps the release of a shared admission to its own
	// records, those of the member for its amount, in the shared store and
	// in process, never another admission's: OwnRecord.
	ownRecord bool
}

// Amount is the amount h's admission was checked for (0 for a hold made
// from its key and member alone).
func (h Hold) Amount() int64 { return h.amount }

// WithAmount is h with the amount its admission was checked for: for a
// hold kept on disk and read back.
func (h Hold) WithAmount(amount int64) Hold {
	h.amount = amount
	return h
}

// OwnRecord is h released from its own admission's records only: for an
// admission decided in process, its in-process records (InProcess); for a
// shared one, or a check whose answer was lost, the records of the member
// for h's amount, in the shared store and in process
// (Store.ReleaseIfAmount). A record of the member for another amount is
// another admission's (the store refused this one there, or this instance
// decided the other while cut off from the shared store) and stays.
func (h Hold) OwnRecord() Hold {
	h.ownRecord = true
	return h
}

// IsOwnRecord reports whether h is released from its own records only.
func (h Hold) IsOwnRecord() bool { return h.ownRecord }

// InProcess reports whether h's admission was decided in process during
// an outage and recorded there only (SourceLocal, its member new to the
// in-process windows or a retry of such an admission): releasing h leaves
// the shared store's record of the member, which is another admission's.
func (h Hold) InProcess() bool { return h.inProcess }

// InProcessOnly is h released from the in-process windows only, as a hold
// whose admission was decided in process (InProcess): for a hold kept on
// disk and read back, which must keep where it is released from.
func (h Hold) InProcessOnly() Hold {
	h.inProcess = true
	return h
}

// IsOwnKey reports whether h is released from its own key's windows only
// (OwnKey).
func (h Hold) IsOwnKey() bool { return h.ownKey }

// OwnKey is h released from the windows of its own key only (and its
// merchant's use of them, and its own use of reservations), not from its channel-wide key's windows: for a slot
// whose requestId is held by a payment of another bizType on the same
// channel, which counts the same member in those windows.
func (h Hold) OwnKey() Hold {
	h.ownKey = true
	return h
}

// ownKeyWindows keeps the windows of ws that OwnKey releases.
func (h Hold) ownKeyWindows(ws []KeyWindow) []KeyWindow {
	out := ws[:0:0]
	for _, w := range ws {
		if w.Key.base() == h.Key || w.Track == TrackOwn {
			out = append(out, w)
		}
	}
	return out
}

// Everywhere is h released from every store: for a slot whose payment can
// never call the channel under the key (its order ended elsewhere, or
// NOT_SENT there), so that any record of the member on the key, this
// admission's or another instance's of the same payment, is given back.
func (h Hold) Everywhere() Hold {
	h.inProcess = false
	return h
}

// HoldOf is the hold of member on key with unknown windows: see Hold.
func HoldOf(key Key, member string) Hold { return Hold{Key: key, Member: member} }

// OfMerchant returns h for a member checked for merchant: a release of a
// hold whose windows are unknown (HoldOf) also leaves that merchant's own
// use of the windows with limits per merchant (the merchant "-" for "",
// as the check counted it).
func (h Hold) OfMerchant(merchant string) Hold { h.merchant = merchant; return h }

// Merchant is the merchant OfMerchant gave h.
func (h Hold) Merchant() string { return h.merchant }

// Known reports whether h knows the windows that recorded its member.
func (h Hold) Known() bool { return h.windows != nil }

// held returns the windows h's member is recorded in; amountsOnly keeps
// the amount windows.
func (h Hold) held(amountsOnly bool) []KeyWindow {
	out := make([]KeyWindow, 0, len(h.windows))
	for _, w := range h.windows {
		if w.Track == TrackOther || amountsOnly && !w.Amount {
			continue
		}
		w.Reserved, w.OwnReserve = nil, 0
		out = append(out, w)
	}
	return out
}

// HoldFromWindowKeys rebuilds the hold of member on key from the names of
// the windows that recorded it (Decision.WindowKeys, as an order keeps
// them), so that a payment settled by another process, or after a
// restart, is given back from the windows it was admitted into. A name is
// a store's window name: "{CHANNEL}:BIZTYPE:ID" after any key prefix
// (WindowKey, redisstore.Store.WindowKey). An empty list, or a name that does
// not parse, gives a hold with unknown windows (HoldOf) and the error.
func HoldFromWindowKeys(key Key, member string, names []string) (Hold, error) {
	if len(names) == 0 {
		return HoldOf(key, member), nil
	}
	ws := make([]KeyWindow, 0, len(names))
	for _, n := range names {
		w, err := ParseWindowKey(n)
		if err != nil {
			return HoldOf(key, member), err
		}
		ws = append(ws, w)
	}
	return Hold{Key: key, Member: member, windows: ws}, nil
}

// ParseWindowKey reads a window's name back into the window it names
// (without its limit, which no name holds): the inverse of WindowKey, and
// of redisstore.Store.WindowKey once the prefix (everything before the last '{')
// is dropped. A reservation's own-use window, whose key is reserveKey,
// comes back with Track TrackOwn; a merchant's use of a window, whose key
// is MerchantKey, with its Merchant.
func ParseWindowKey(name string) (KeyWindow, error) {
	i := strings.LastIndexByte(name, '{')
	rest := name[i+1:]
	ch, rest, ok1 := strings.Cut(rest, "}:")
	biz, id, ok2 := strings.Cut(rest, ":")
	if i < 0 || !ok1 || !ok2 {
		return KeyWindow{}, fmt.Errorf("window name %q: want {CHANNEL}:BIZTYPE:ID", name)
	}
	w, err := parseWindowID(id)
	if err != nil {
		return KeyWindow{}, fmt.Errorf("window name %q: %w", name, err)
	}
	kw := KeyWindow{Key: Key{BizType: biz, Channel: ch}, Window: w}
	own := strings.TrimPrefix(biz, anyBizType)
	if base, merchant, ok := kw.Key.Merchant(); ok {
		kw.Merchant = merchant
		if err := base.Validate(); err != nil || MerchantProblem(merchant) != "" {
			return KeyWindow{}, fmt.Errorf("window name %q: bad merchant window", name)
		}
	} else if own != biz && own != "" {
		kw.Track = TrackOwn
		if CodeProblem(own) != "" {
			return KeyWindow{}, fmt.Errorf("window name %q: bad reservation bizType", name)
		}
	} else if err := kw.Key.Validate(); err != nil {
		return KeyWindow{}, fmt.Errorf("window name %q: %w", name, err)
	}
	return kw, nil
}

// parseWindowID reads Window.ID back: every field of the window but its
// limit.
func parseWindowID(id string) (Window, error) {
	var w Window
	s := id
	if rest, ok := strings.CutPrefix(s, "a"); ok {
		w.Amount = true
		s = rest
	}
	bad := func() (Window, error) { return Window{}, fmt.Errorf("window ID %q does not parse", id) }
	unit, rest, calendar := strings.Cut(s, ".")
	if !calendar || w.Amount && (unit != string(CalendarDay) && unit != string(CalendarMonth)) {
		// A sliding window: milliseconds, then the currency of an amount window.
		ms, cur, _ := strings.Cut(s, ".")
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil || n <= 0 || (cur != "" && !w.Amount) {
			return bad()
		}
		w.Size, w.Currency = time.Duration(n)*time.Millisecond, cur
		return w, nil
	}
	if unit != string(CalendarDay) && unit != string(CalendarMonth) {
		return bad()
	}
	hhmm, zoneCur, ok := strings.Cut(rest, ".")
	if !ok || len(hhmm) != 4 {
		return bad()
	}
	hh, err1 := strconv.Atoi(hhmm[:2])
	mm, err2 := strconv.Atoi(hhmm[2:])
	if err1 != nil || err2 != nil || hh > 23 || mm > 59 {
		return bad()
	}
	zone := zoneCur
	if w.Amount {
		// The currency, if any, follows the zone: a zone name has no '.',
		// an ISO 4217 code is three letters.
		if j := strings.LastIndexByte(zoneCur, '.'); j >= 0 && len(zoneCur)-j == 4 {
			zone, w.Currency = zoneCur[:j], zoneCur[j+1:]
		}
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return bad()
	}
	w.Calendar = Calendar{Unit: CalendarUnit(unit), Zone: loc, Cutoff: time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute}
	return w, nil
}

// unionWindows returns held followed by the windows of current that are
// not among them (the same stored window: idOf).
func unionWindows(held, current []KeyWindow) []KeyWindow {
	seen := make(map[windowID]bool, len(held))
	for _, w := range held {
		seen[idOf(w)] = true
	}
	for _, w := range current {
		if !seen[idOf(w)] {
			held = append(held, w)
		}
	}
	return held
}

// WindowNames names the windows h knows that record its member (WindowKey,
// without a store prefix), nil when its windows are unknown: what
// HoldFromWindowKeys reads back, for a hold kept on disk.
func (h Hold) WindowNames() []string {
	if !h.Known() {
		return nil
	}
	held := h.held(false)
	out := make([]string, len(held))
	for i, w := range held {
		out[i] = WindowKey(w)
	}
	return out
}
