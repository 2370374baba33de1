package ratelimit

import (
	"context"
	"errors"
	"time"
)

// The contract between the Limiter and the stores that keep its windows:
// Store, and what a store may implement besides (WindowKeyer, Learner).
// The rules every store follows are Model's (model.go).

// ErrNotSent is wrapped by a store's error for a call that provably
// recorded nothing: no connection was made (a dial error, an exhausted
// pool, a closed client), or the store answered an error (Redis refuses a
// call before running it, and the check script ends with an error before
// it records anything). The Limiter decides such a check by its degraded
// policy. A failed call without it may have run, and its outcome is
// unknown.
var ErrNotSent = errors.New("ratelimit: the call recorded nothing in the store")

// StoreResult is what one atomic check against the shared store decided.
type StoreResult struct {
	Allowed bool
	// Count is the occupancy of the binding window after the check.
	Count int64
	// Counts is the occupancy of every window after the check, in the order
	// of the windows asked.
	Counts []int64
	// Window is the index in Rule.Windows of the binding window.
	Window int
	// RetryAfter is how long until the binding window has room; zero when
	// allowed.
	RetryAfter time.Duration
	// Duplicate is true when the member was already in the window.
	Duplicate bool
	// Conflict is true when a window holds the member with another amount:
	// refused and recorded nowhere (see Model). Window is the first window
	// that holds it so.
	Conflict bool
	// ExceedsCap is true for a refusal by a window whose weight alone is
	// above its limit: no wait admits it. Window is the first such window.
	ExceedsCap bool
	// Limits, when some window binds by a learned limit at the check (its
	// effective limit is below its configured one: learned.go), is the
	// effective limit of every window, in the order of the windows asked;
	// nil otherwise.
	Limits []int64
	// At, for an admission, is the store's own time, in whole
	// microseconds, at which the member was admitted: for the Redis store the
	// time the check script read from Redis TIME (or was given, in tests)
	// for the call, shared by every member of a coalesced call; for the
	// in-process stores their clock. For a member already held (Duplicate),
	// it is when the member was first admitted, as the earliest of the
	// sliding windows holding it recorded it (its sorted-set score), or the
	// time of this check when only calendar windows hold it (they keep no
	// times). Zero for a refusal, and for a check of no windows.
	At time.Time
	// Now is the store's time of the call, admission or refusal: for
	// the Redis store the Redis TIME its check script read (in whole
	// microseconds); for Model and the in-process stores the time of the
	// check.
	Now time.Time
}

// Store is the shared state behind the limiter: one atomic check per call.
// The Redis store (redisstore) is the implementation; the interface lets
// tests and benchmarks put other stores (such as the naive three-command version) behind the
// same Limiter. The windows of one call all belong to one channel.
type Store interface {
	// Check admits or refuses member, paying amount, against every window
	// at once.
	Check(ctx context.Context, windows []KeyWindow, member string, amount int64) (StoreResult, error)
	// Release removes member from every window given. found reports
	// whether some window held it (a record of it, counted or not yet
	// swept past its window).
	Release(ctx context.Context, windows []KeyWindow, member string) (found bool, err error)
	// ReleaseIfAmount is Release from the windows that hold member for
	// amount only (Model.ReleaseIfAmount): a record of it for another
	// amount is another admission's and stays.
	ReleaseIfAmount(ctx context.Context, windows []KeyWindow, member string, amount int64) (found bool, err error)
	// Usage returns the use of each window.
	Usage(ctx context.Context, windows []KeyWindow) ([]int64, error)
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
}

// WindowKeyer is implemented by a Store that names the windows it keeps,
// so that an admitted Decision can say where its member is held
// (Decision.WindowKeys): the Redis store by its Redis keys, the in-process
// stores by WindowKey.
type WindowKeyer interface {
	WindowKey(w KeyWindow) string
}

// WindowKey names window w as the in-process stores (LocalStore,
// DurableStore) name it, and as the Redis store does without its prefix:
// "{CHANNEL}:BIZTYPE:ID" (Window.ID), such as "{ALIPAY}:PAY:1000".
func WindowKey(w KeyWindow) string {
	return "{" + w.Key.Channel + "}:" + w.Key.BizType + ":" + w.ID()
}

// Learner is implemented by a Store that keeps learned limits (learned.go):
// the Redis store, LocalStore and DurableStore. Each takes the windows of one
// channel and skips those that do not learn (KeyWindow.Learn). Adaptive
// limits need one; with another Store the Limiter enforces configured
// limits only.
type Learner interface {
	// Throttle records a throttle by the channel now, with its retry-after
	// (zero when it gave none), on every learning window given
	// (Model.Throttle).
	Throttle(ctx context.Context, windows []KeyWindow, retryAfter time.Duration) error
	// Learned returns the learned limits in force of the windows given, in
	// their order (Model.Learned).
	Learned(ctx context.Context, windows []KeyWindow) ([]LearnedLimit, error)
	// ResetLearned forgets the learned limits of the windows given.
	ResetLearned(ctx context.Context, windows []KeyWindow) error
}

// WindowRegistry is implemented by a Store that keeps the windows each
// key's documents gave it (window_registry.go), so that a release with
// unknown windows reaches the windows of documents another instance
// loaded, or this one before it restarted: the Redis store. The
// in-process stores, which hold no other instance's admissions and start
// empty, do not need to.
type WindowRegistry interface {
	// RegisterWindows records that each key had its windows at at.
	RegisterWindows(ctx context.Context, byKey map[Key][]KeyWindow, at time.Time) error
	// RegisteredWindows returns the windows recorded for keys that may
	// still hold a member admitted while they were in force (retention).
	RegisteredWindows(ctx context.Context, keys []Key, now time.Time) ([]KeyWindow, error)
}

// KeysReader is implemented by a Store that reads the windows of many
// keys in one round trip to each of its nodes: the Redis store, which
// pipelines a read of each key (a Cluster's pipeline goes to each key's
// node). UsageOf and LearnedOf read through it; a key's read is the one
// Usage or Learned would make, and its error is its own.
type KeysReader interface {
	// UsageOfKeys returns, for each group (one key's windows), what Usage
	// would return for it.
	UsageOfKeys(ctx context.Context, groups [][]KeyWindow) ([][]int64, []error)
	// LearnedOfKeys returns, for each group, what Learned would return for
	// it (the store is a Learner).
	LearnedOfKeys(ctx context.Context, groups [][]KeyWindow) ([][]LearnedLimit, []error)
}
