package redisstore

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts, one .lua file each. Every script that reads the time starts
// with now.lua, which reads it once, from Redis TIME in production; every
// script that reads or writes the amount a sliding count window's member
// was admitted for has identity.lua's functions.

//go:embed now.lua
var nowLua string

//go:embed identity.lua
var identityLua string

// timed returns the script of body run after now.lua.
func timed(body string) *redis.Script { return redis.NewScript(nowLua + body) }

// Window kinds as the scripts receive them: bit 1 amount, bit 2 calendar.
const (
	kindCount          = 0
	kindAmount         = 1
	kindCalendar       = 2
	kindCalendarAmount = 3
	// argsPerWindow is the stride of the window arguments: kind, limit,
	// size (µs), four period boundaries (µs; zero for sliding windows) and
	// the window's Track.
	argsPerWindow = 8
)

//go:embed check.lua
var checkLua string

// checkScript decides one or more requests (members, each with an amount)
// against a list of windows, atomically, in arrival order: the answer for
// each member is the one a script run for that member alone would give at
// the same instant. All KEYS share one hash tag (the channel), so the script
// is Redis Cluster safe. Time is read from Redis, never from app servers, in
// microseconds.
//
//	KEYS[i], i ≤ n       window i: a sorted set (sliding; member = requestId,
//	                     score = admit time µs) or a hash (calendar; field =
//	                     requestId, value = its amount; '#s' = use, '#p' = period)
//	KEYS[n+1...]         for each sliding amount window, in order, the hash of
//	                     its members' amounts ('#s' = their sum)
//	ARGV[1]              TTL margin in ms, past the longest a member can stay
//	ARGV[2]              0: read the time from Redis TIME (always, in production);
//	                     else the time in µs (tests drive time through it)
//	ARGV[3]              n, the number of windows; -n when each member
//	                     names its own windows among them (below)
//	KEYS[k+e]            after those (k keys), for the e-th learning window,
//	                     its learned limit: a hash {l, t, nb, e}
//	                     ('<window key>:L', ratelimit's learned.go)
//	ARGV[4+8(i-1)...]    window i: kind (1 amount, 2 calendar: bits), limit,
//	                     size µs, for a calendar window four period
//	                     boundaries b1<b2<b3<b4 around the app server's clock
//	                     (ratelimit.Calendar.Periods): the period is the one of
//	                     [b1,b2), [b2,b3), [b3,b4) holding Redis's now; and
//	                     its track (ratelimit.Track: 0 a rule's window, 1 the
//	                     request's own use of a reservation, recorded and
//	                     never refusing, 2 another name's, only read) plus
//	                     4 × p for a merchant's use of window p (1-based),
//	                     which holds every member window p holds
//	ARGV[4+8n]           r, the number of reservations, then r quadruples:
//	                     window i, the window counting the other name's use,
//	                     the reservation, and the sum S of window i's
//	                     reservations, the request's own included (the Model:
//	                     window i's limit is its limit less the other names'
//	                     unmet reservations; under a limit L < S each
//	                     reservation is ⌊reservation × L / S⌋)
//	ARGV[5+8n+4r]        a, the number of learning windows, then a pairs:
//	                     the window (1-based) and its step (ratelimit.Learning.Step)
//	ARGV[6+8n+4r+2a...]  member, amount pairs, in arrival order; for -n,
//	                     m, the number of windows of each member, then
//	                     per member its id, its amount and its m windows
//	                     (1-based), in its own order. A batch of checks
//	                     by several merchants names each merchant's use
//	                     of a window once, and each member the windows of
//	                     its own merchant: every member's reply is the one
//	                     a call of its own windows alone would give.
//
// The rules are ratelimit.Model's (model.go): a window's use is the sum of its
// members' weights (1, or the amount in an amount window); a member is
// admitted only if every window already holds it or has use + weight ≤
// limit, and is then added to every window that does not hold it. A member
// already held is not counted again (client or network retries, or the same
// member twice in one call); refused members are not recorded. A member
// held with another amount is a conflict, decided before the rest: refused,
// recorded nowhere. Each window knows the amount a member was admitted for:
// a calendar window's hash holds it (its weight is 1 in a count window), a
// sliding amount window's amounts hash too, and a sliding count window
// keeps it in hashes beside its sorted set, one per slice of admission
// time ('<window key>:#~<slice>', identity.lua): a member's record is in
// the hash its score names, written when the member is added, deleted by
// a release, and expiring with its slice once every member of the slice
// has left the window (plus the margin). It is read only for a member the
// window holds, so one left behind is harmless. These hashes are not
// among KEYS: each is named from a score the script reads, always in the
// window's hash slot (its key's hash tag), which Redis Cluster allows
// while the slot is stable; while it moves, an access Redis refuses ends the
// script with TRYAGAIN before it records anything (identity.lua).
//
// The Redis work is per call, not per member: TIME once; per window a trim
// (sliding: ZREMRANGEBYSCORE, and for amounts the weights of the members
// leaving; calendar: one HGET of the period, DEL when a new one started),
// the use, one ZMSCORE or HMGET for the members already in, the oldest
// members that must leave for a retry-after, and, when something was
// admitted, one ZADD or HSET, one HINCRBY and one expiry (a sliding count
// window: one HSET of the members' amounts and its expiry). So a call
// carrying a batch of members (Options.Coalesce) costs Redis
// little more than a call for one.
//
// Learned limits (ratelimit's learned.go) replace a learning window's limit by its
// effective limit: 0 before the not-before, else min(limit, l + ⌊(now −
// t) / size⌋ × step) while now < e (a state past e is deleted). A refusal
// by such a window waits for its members to leave under the limit after
// the not-before, and at least until then. With no learned limit, a
// learning window costs one HMGET.
//
// Returns the call's time (µs: the Redis TIME it read, or ARGV[2]), the one
// instant every member of the call is decided at, the number of windows
// whose effective limit is below their limit and, when it is not 0, the
// effective limit of each window, then 4+n integers per member (4+m when
// members name their windows, each in its own order): {allowed, window
// index (1-based), retry-after µs for a refusal,
// or for an admission how long before the call's time the member was first
// admitted (0 for a member this call records; for a member a sliding window
// held from before, the call's time less the earliest score it has in those
// windows; 0 when only calendar windows hold it: they keep no times),
// duplicate (1), conflict (2) or exceeds a cap (3), use of window 1, …, use
// of window n}. So the reply grows by two integers per call (n more while
// a learned limit binds), nothing per member. A refusal by a window whose
// weight alone is above its limit exceeds a cap: its binding window is the
// first such window and its retry-after still the longest wait. The
// binding window is the refusing window with the longest wait, or, when
// admitted, the window with the least (effective) room left.
var checkScript = timed(identityLua + checkLua)

//go:embed plain_check.lua
var plainCheckLua string

// plainCheckScript is checkScript for the plainest key: one sliding count
// window of a rule's own (no reservation), called with checkScript's KEYS
// and ARGV (ARGV[5] its limit, ARGV[6] its size, ARGV[13] 1 when the
// window learns, with its learned-limit hash at KEYS[2], then members).
// A learning window costs one HGET while no learned limit is in force (a
// state that ended is deleted, as checkScript does); while one is, the
// script changes nothing and answers {now, -1}, and the store asks
// checkScript, which applies it. It follows the same rules and gives the same reply, and
// does only what such a window needs: TIME, the trim, ZCARD, one ZMSCORE
// when the window holds anyone, an HGET of the amount of a member it
// holds (more on a miss: identity.lua), one ZRANGE for a refusal's
// retry-after, and, when something was admitted, one HSET of the admitted
// members' amounts with its PEXPIRE (an HLEN first when the window holds
// over 128 members; more hashes in a burst), one ZADD and one PEXPIRE. A key
// pays for the features it uses: none of checkScript's tables of windows,
// reservations and learned limits are built (bench/limiter's store-open).
// The property tests check both scripts against the model
// (TestStoresAgreeWithModel draws the plain key a quarter of the time).
var plainCheckScript = timed(identityLua + plainCheckLua)

//go:embed learn.lua
var learnLua string

// learnScript reads or changes the learned limits of learning windows
// (ratelimit's learned.go), atomically, with the time from Redis.
//
//	KEYS[2j-1], KEYS[2j]  window j: its sorted set, its learned-limit hash
//	                      {l, t, nb, e} ('<window key>:L')
//	ARGV[1]               0: the time from Redis TIME; else µs (tests)
//	ARGV[2]               1 throttle, 2 read, 3 reset (delete)
//	ARGV[3]               TTL margin in ms, past a state's end
//	ARGV[4]               the channel's retry-after in µs (throttle)
//	ARGV[5]               a, the number of windows, then 5 per window:
//	                      size µs, limit, step, decrease (millionths), floor
//
// A throttle sets each window's state to the model's (ratelimit.Model.Throttle): with
// u = ZCOUNT of (now − size, now] and v the value of a state in force,
// l = max(floor, min(v, ⌊u × decrease / 10⁶⌋)), nb = max(now + retry-after,
// nb), e = max(nb, now + ⌈(limit − l) / step⌉ × size), and a TTL to e plus
// the margin; it deletes the state when l ≥ limit and nb ≤ now. Returns
// the time, then {l, t, nb, e} per window as it is after the call (l = -1:
// none in force; a read deletes nothing).
var learnScript = timed(learnLua)

//go:embed release.lua
var releaseLua string

// releaseScript removes a member from every window given, with its weight
// and its record of the member's amount. KEYS as checkScript's (windows,
// then the amounts hashes); ARGV[1] = n, ARGV[1+i] = kind of window i,
// ARGV[1+n+i] = its size in µs (0 for a calendar window), ARGV[2n+2] = the
// member. With ARGV[2n+3], an amount, it removes the member only from the
// windows that hold it for that amount (Store.ReleaseIfAmount): a calendar
// window's hash and a sliding amount window's amounts hash hold it, and a
// sliding count window's hash of the slice its score names (identity.lua).
// A window holding the member for another amount, or a sliding count
// window whose record of it is gone, keeps it. Returns the number of
// windows that held it and were released.
var releaseScript = redis.NewScript(identityLua + releaseLua)

//go:embed usage.lua
var usageLua string

// usageScript reads, without changing anything, the use of each window.
// KEYS as checkScript's; ARGV[1] is the time as checkScript's ARGV[2],
// ARGV[2] = n, then the window arguments as checkScript's. Returns the uses.
var usageScript = timed(usageLua)
