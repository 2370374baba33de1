package ratelimit

import "time"

// Source says what decided a Decision.
type Source string

// Decision sources.
const (
	SourceUnlimited Source = "unlimited"  // no limit: no store was asked
	SourceClosed    Source = "closed"     // a window with limit 0
	SourceRedis     Source = "redis"      // the shared store
	SourceNearCache Source = "near_cache" // remembered full window, no store call
	SourceLocal     Source = "local"      // degraded: in-process windows
	SourceFailOpen  Source = "fail_open"  // degraded: policy allow
)

// Decision is the outcome of one check. Being limited is a normal result,
// not an error.
type Decision struct {
	Key     Key
	Allowed bool
	// RequestAmount and Currency are what the request pays (zero and empty
	// for a request without an amount), for reports.
	RequestAmount int64
	Currency      string
	// Scope is the key whose window binds: Key, or the channel-wide key
	// "*:CHANNEL" when one of its windows binds.
	Scope Key
	// Merchant, when a merchant's limit binds (Rule.Merchants), is that
	// merchant: the request's, or NoMerchant for a request naming none.
	// Limit, Count and Remaining are then the merchant's own use of
	// Scope's window, and RetryAfter the wait for it to fall. Empty when a
	// window binds.
	Merchant string
	// Rule names the binding window's kind, as Window.Name does: "count/1s",
	// "amount/day". Empty for an unlimited key.
	Rule string
	// Amount is true when the binding window caps amounts: Limit, Count and
	// Remaining are then in minor units.
	Amount bool
	// Limit and Window describe the binding window: the one that refused, or
	// the admitted window with the least room left. Limit is Unlimited for an
	// unlimited key; Window is zero for a calendar window. Limit is the
	// window's effective limit: its learned limit when Learned.
	Limit  int64
	Window time.Duration
	// Learned is true when the binding window's limit is a learned one
	// (learned.go): below its configured limit, which is Configured; 0
	// while the channel's retry-after runs.
	Learned    bool
	Configured int64
	// Count is the binding window's use after the check (admissions, or
	// amount); Remaining is what is left of its limit for this request
	// (less what it keeps for other bizTypes' unmet reservations).
	Count     int64
	Remaining int64
	// Windows is every window that applied to the request (the key's, then
	// the channel-wide key's), each with its limit, what it keeps for other
	// bizTypes' reservations and its use after the check, when the store
	// reported it (Redis and in-process decisions); nil otherwise.
	Windows []WindowUsage
	// RetryAfter is how long until every refusing window has room; zero
	// when allowed. For a closed key it is the time until ClosedUntil, and
	// zero when no reopening is known.
	RetryAfter time.Duration
	// ClosedUntil, for a closed key (Closed), is the instant a schedule
	// opens it again: the first schedule boundary at which the rules in
	// force no longer close it. Zero when none is known (closed by the base
	// rules).
	ClosedUntil time.Time
	Source      Source
	// Shadow is true when the rule refused but the key is in shadow mode, so
	// the request was admitted anyway.
	Shadow bool
	// Duplicate is true when the requestId was already in a window.
	Duplicate bool
	// Conflict is true for a refusal because a window holds the member with
	// another amount: a member's identity is its requestId and its amount
	// (see Model). It is not a full window: Limit and Count describe the
	// first window holding the member, RetryAfter is zero, and no wait
	// helps.
	Conflict bool
	// ExceedsCap is true for a refusal by a window whose weight alone is
	// above its limit (an amount above the cap): no wait admits it, and the
	// binding window is that window. In a degraded decision the limit is
	// this instance's share, so a wait may help there (RetryAfter).
	ExceedsCap bool
	// Unknown is true for a refusal given because the store's answer was
	// lost (a timeout after the call may have reached Redis): the member may
	// hold a slot after all. A retry with the same member is exact.
	Unknown bool

	// The admission record: what a channel's "you sent us more than the
	// limit at 10:03:17" is answered from.

	// AdmittedAt, for an admission, is the store's own time, in whole
	// microseconds, at which the member was admitted (StoreResult.At):
	//   - SourceRedis: the Redis TIME the check script read for its call
	//     (every member of one coalesced call shares it; the time tests
	//     pass to the script in their place). For a Duplicate, the time it
	//     was first admitted: the earliest score the member has in the
	//     sliding windows holding it (ZSCORE on a WindowKeys key), or the
	//     time of this check when only calendar windows hold it (they keep
	//     amounts, not times).
	//   - SourceLocal (degraded, in process): the limiter's clock
	//     (Options.Now) read by the in-process store; a Duplicate as above,
	//     on that store's windows. With a DurableStore as the Store, its
	//     clock, and a Duplicate's first admission survives restarts.
	//   - SourceUnlimited, SourceFailOpen, and a Shadow admission of a
	//     refusal, which no window recorded: the limiter's clock when the
	//     check began.
	// Zero for a refusal (Allowed false), whatever its source.
	AdmittedAt time.Time
	// DecidedAt is when the decision was taken, in whole microseconds,
	// admission or refusal: for SourceRedis the Redis TIME the check script
	// read (StoreResult.Now); for every other source, and a Redis answer
	// that carried none, the limiter's clock when the check began. A
	// Duplicate's DecidedAt is this check's time, its AdmittedAt the first
	// admission's.
	DecidedAt time.Time
	// RequestMerchant is the merchant the request named (Request.Merchant;
	// empty for none), for reports and the decision log, whichever window
	// binds.
	RequestMerchant string
	// WindowKeys names the windows that count the admitted member, in the
	// order they applied (the key's, its channel-wide key's, then its own
	// use of that key's reservations); nil for a refusal and for an
	// admission no window recorded (unlimited, fail-open, a Shadow
	// admission of a refusal). Windows only read for other bizTypes'
	// reservations are not named. Each is the store's name (WindowKeyer):
	// for SourceRedis the exact Redis key, a sorted set holding the member
	// (ZSCORE key requestId, its admission time in µs) or, for a calendar
	// window, a hash (HGET key requestId, its amount); for the in-process
	// stores (SourceLocal, a LocalStore or DurableStore as the Store),
	// WindowKey: the same name without the Redis prefix,
	// "{CHANNEL}:BIZTYPE:ID".
	WindowKeys []string
	// Hold is what gives the admission back (Limiter.Release): its key and
	// member, and for an admission windows recorded (WindowKeys not nil)
	// those windows; for a refusal with an unknown outcome (Unknown), the
	// windows the lost call would have recorded the member in. For any
	// other refusal, or an admission no window recorded, its windows are
	// unknown, and a release touches only what the limits in force give
	// the key.
	Hold Hold
	// LimitsVersion identifies the limits document the decision was taken
	// under (every decision, refusals included): its Config.Version, the
	// hex MD5 of the document as the config center names versions; for a
	// Config made in code without one, a short hash of its content,
	// computed when it is set. Empty before any limits were loaded.
	LimitsVersion string

	// localOnly: a degraded admission whose in-process record is one
	// decided in process (fallback.CheckLocalOnly), not a copy of a Redis
	// admission: it sets Hold's inProcess.
	localOnly bool
}

// WindowUsage is one window of a rule and what it holds: admissions, or
// amount for an amount window.
type WindowUsage struct {
	Window
	// Scope is the key the window belongs to (the request's key, or the
	// channel-wide key).
	Scope Key
	// Merchant, for the request's merchant's own use of Scope's window
	// under its merchant limit, names the merchant; empty for the window
	// itself.
	Merchant string
	Count    int64
	// Effective is the window's limit at the check: Limit, or its learned
	// limit when lower (learned.go).
	Effective int64
	// Kept is what the window keeps for the other named bizTypes'
	// reservations they have not used: no room for this request. Zero
	// without reservations.
	Kept int64
}

// Closed reports whether the key refuses everything (a window with limit 0).
func (d Decision) Closed() bool { return d.Source == SourceClosed }

// Degraded reports whether the decision was taken without the shared store.
func (d Decision) Degraded() bool { return d.Source == SourceLocal || d.Source == SourceFailOpen }

// Observer receives every decision, for metrics and reports. It is called on
// the request path and must not block.
type Observer interface {
	Decided(d Decision, elapsed time.Duration)
	Released(k Key)
	StoreFailed(k Key, err error)
}

type nopObserver struct{}

func (nopObserver) Decided(Decision, time.Duration) {}
func (nopObserver) Released(Key)                    {}
func (nopObserver) StoreFailed(Key, error)          {}
