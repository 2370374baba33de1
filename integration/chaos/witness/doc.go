// Package witness is the independent checker of the chaos campaign: it
// reads a history of a run (3 payserver instances, MariaDB, Redis and the
// channel emulator under faults) and checks payserver's promises by brute
// force from the records alone.
//
// # Independence
//
// The witness imports no package of payserver (imports_test.go fails if
// any file does). It reads limits documents with its own parser
// (limits.go, gopkg.in/yaml.v3) and names calendar periods from the zone's
// wall clock (calendar.go: t.In(loc), Date, Clock and ZoneBounds), never
// by building a boundary with time.Date. Its rules come from the docs, as
// cited below; only table, column, Redis key and JSON field names are
// taken from the code's external contract.
//
// # The history
//
// JSON lines, one Record a line, each an object with exactly one field
// naming its kind, in any order (ReadHistory, WriteHistory):
//
//	{"config":{"instances":3,"policy":"local","quietFromUs":…,"dumpedAtUs":…}}
//	{"limits":{"version":"<md5>","raw":"<the document>","fromUs":…,"toUs":…}}
//	{"fault":{"kind":"redis","fromUs":…,"toUs":…,"lostWrites":0}}
//	{"op":{"seq":1,"kind":"pay","requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","amount":100,"currency":"CNY","invokeUs":…,"completeUs":…,"status":200,"body":{…}}}
//	{"order":{"order_no":"PS…","request_id":"r1",…,"status":"SUCCEEDED","admitted_at_us":…,"limits_version":"<md5>"}}
//	{"ledger":{"seq":7,"op":"pay","channel":"ALIPAY","orderNo":"PS…","requestId":"r1",…,"outcome":"SUCCEEDED","moneyMoved":true}}
//	{"member":{"key":"payserver:rl:{ALIPAY}:ONLINE_PAY:1000","member":"r1","scoreUs":…}}
//
// The records:
//
//   - op: every client operation (pay, getPay, acquire, release) with its
//     invoke and completion times (Unix µs; completeUs 0 and status 0 when
//     no answer came) and the answer's body as received. For an admitted
//     acquire the runner may add admittedAtUs, the member's score read
//     back with ZSCORE; without it the acquisition's time is its op's
//     interval.
//   - order: the orders table (migrations/mysql) with its column names,
//     DATETIME columns as _us.
//   - ledger: the emulator's GET /ledger lines as served (README.md, "The
//     channel emulator").
//   - limits: every document published, its bytes, its MD5 (what
//     orders.limits_version records) and when it was in force: fromUs its
//     publication, toUs when every instance had the next one (so
//     consecutive intervals overlap by the propagation).
//   - fault: intervals the runner broke something; kind "redis" for the
//     limiter's store (target: a channel whose slot failed over, or all),
//     with lostWrites λ (-1: Redis came back empty).
//   - member: after the quiet period, every member of every sorted set and
//     calendar hash under payserver:rl:* (SCAN, ZRANGE WITHSCORES, HGETALL),
//     read at config.dumpedAtUs.
//
// Times from different clocks (runner, instances, Redis, MariaDB, the
// emulator) are compared with Options.ClockUncertainty between them.
//
// # The rules
//
// Property 1, single-pay (docs/DESIGN.md "POST /pay": "the channel is
// called at most once per requestId"): per requestId the ledger holds at
// most one processed pay (SUCCEEDED, DECLINED other than ORDER_CLOSED, or
// PROCESSING, counted once per channel and orderNo since the gateway is
// idempotent there; THROTTLED, ERROR and NONE were not processed) and at
// most one line with moneyMoved; no money moved for a requestId with no
// order or whose order is FAILED (NOT_SENT included).
//
// Property 2, durable-outcome: every 2xx POST /pay or GET /pay answer has
// an order of its requestId with the answer's orderNo and amount, and a
// final answer (SUCCEEDED, FAILED and its failureCode) is the order's
// final state; after the quiet period no order is PROCESSING or UNKNOWN;
// an order is SUCCEEDED exactly when its channel's ledger moved money for
// its orderNo (same amount, currency and trade number); the channel never
// processed a pay of an order ended NOT_SENT.
//
// Property 3, within-limits. Sources: docs/DESIGN.md "The rules",
// docs/OPERATIONS.md "Channel quotas". An admission is an order with
// admitted_at_us, or an acquire answered 200 that is not a duplicate
// (member "#api:chaos:<requestId>"). Its windows are those of the document whose
// version the order records (for an acquisition: every document in force
// around it) for its key BIZTYPE:CHANNEL and, unless the bizType is
// RESOLVE, the channel-wide key *:CHANNEL: the schedule in force for the
// key (from inclusive, to exclusive) or the key's own rule; every count
// window, and an amount window when its currency is the payment's (or it
// names none). Shadow rules are not checked.
//
//   - Sliding window of size S: at instant t it holds the slots admitted
//     in (t-S, t]; a slot admitted at a leaves at exactly a+S.
//   - Calendar window: the slots admitted in the period of t, a day or a
//     month in its zone from its cutoff; a period starts at the first
//     instant whose wall clock is at or past the cutoff on its date (at the
//     transition where daylight saving skips it).
//   - A slot counts while certainly held: a NOT_SENT order's slot, and a
//     FAILED order's amount, until the order's last update (less the clock
//     uncertainty); an acquisition's until a release of it was sent.
//   - The check: at each admission whose time is exact and whose rule is
//     unambiguous, for each of its windows, the use after it (every
//     certainly held slot in the window then, itself included) plus, on a
//     channel-wide window with reservations, every other name's unmet
//     reservation max(0, r - its use), must be within that document's
//     limit. Checking at every admission covers every sliding window (its
//     use only grows at admissions) and every calendar period.
//   - Limit changes: a window is identified by everything but its limit
//     (kind, size or calendar, cutoff, zone, currency). A document that
//     keeps the id keeps its members and its limit applies to them: the
//     first admission under a lowered limit is checked against the new
//     limit with the old members counted; an admission is never judged by
//     a limit other than the one of the document that admitted it, so a
//     window spanning a change is held, at each admission, to the limit in
//     force for that admission. A new id starts empty. Conservatively, a
//     slot is not counted after the publication of a document that has no
//     window with that id (the in-process store forgets such windows; Redis
//     may not).
//   - Ambiguity is resolved in payserver's favour: admissions at the same
//     microsecond are taken in the order that fits best; an admission
//     within ScheduleSlack of a schedule boundary, or of uncertain time
//     (an acquisition not read back, a payment whose earlier attempt may
//     have taken its slot), is counted only where it certainly is and is
//     not itself checked.
//   - Redis faults (docs/DESIGN.md "When Redis fails"): a window whose span
//     (or period) meets a Redis fault, lengthened by FaultSlack, may hold
//     λ more (the fault's lostWrites; if Redis came back empty, the whole
//     window as it stood: the highest limit the window had in a document
//     in force while what it held was admitted, which after a decrease is
//     more than the limit at the check) under every policy; under local,
//     also the in-process
//     admissions N·min(⌊L/N⌋, ⌊L₁/N⌋·C), L₁ the limit of the key's shortest
//     sliding count window W₁ and C the W₁-long intervals covering the
//     faults (N·⌊L/N⌋ for amount windows); under allow, anything. Under
//     local, L and L₁ are the highest limits the windows had in a document
//     in force in the window's span, and the in-process admissions come on
//     top of that L, not the limit at the check: they do not see Redis's
//     record, which after a decrease still holds the members admitted under
//     the higher limit ("The rules": a change keeps a window's members and
//     applies the new limit to them). N counts each instance once per
//     process it ran as during those faults: an instance fault (a kill, a
//     stop, a restart) between two of them starts a process with empty
//     in-process windows ("When Redis fails", known imprecision: "a fresh
//     instance has no history, so up to a whole share").
//
// Property 4, no-orphan-slot (docs/DESIGN.md "A slot's fate"): each member
// still in its window at the dump (a sliding member with score after the
// dump less the size; a calendar member of the current period) belongs to:
// an order on that channel and key that is SUCCEEDED, UNKNOWN or
// PROCESSING, or FAILED in a count window; a PROCESSING routed order on
// another channel; a payment answered 503 or not at all within
// LostAnswerGrace of the dump; an acquisition its answers say may own it
// (refusal-took-nothing below); or, for "#resolve:<orderNo>:q<n>", an
// order of that channel. Not when a Redis fault that lost writes
// (lostWrites ≠ 0) ended after the member should have left (its last
// release answered 200, or its order's end): an acknowledged release is
// lost with a killed master as an admission is.
//
// Property slot-held, the converse (docs/DESIGN.md "A slot's fate": a
// slot whose fate is to stay counted is never given back): each admission
// whose fate keeps it counted has its member in Redis in each of its
// windows still live at the dump (admitted before the dump, and after it
// less the size or in the dump's period): a SUCCEEDED or UNKNOWN order's
// in every window, a FAILED order's (the channel declined the call) in
// its count windows, an acquisition's when no release of it was sent and
// no later acquire of it lost its answer (503 or none: the limits API
// releases that slot within a minute). Only the windows of every rule set that may have decided it are
// checked. Not when a Redis fault (lengthened by FaultSlack) overlaps the
// admission, which may then have been made in process only, or one after
// it may have lost writes (lostWrites ≠ 0).
//
// Property refusal-took-nothing: no member of a request whose every
// attempt was answered 429 (a payment with no order, or an acquisition)
// is in a live window at the dump. An acquisition's owner is read from the
// answers it got, in the order sent: a 200 owns the slot; a 503 or no
// answer may own it (the limiter's answer was lost; the limits API
// releases it within a minute unless the requestId is acquired again), so
// it is neither required nor forbidden; a 429 owns nothing; a release
// answered 200 ends what came before it.
//
// Property identity (docs/OPERATIONS.md, the limits API: "A requestId's
// identity is its requestId and its amount: acquiring a requestId that
// holds a slot for another amount is 409 IDEMPOTENCY_CONFLICT, never a
// duplicate at the old amount"): an acquire answered 200 as a duplicate
// repeats an acquisition of its own amount (the latest acquire of its
// requestId on its key answered 200 as new, not released before it).
// Under policy local, while Redis fails (lengthened by FaultSlack), it may
// instead repeat an earlier acquisition since the last release that its
// own instance also admitted in the fault: each instance decides in its own
// windows and cannot know what the others admit (docs/DESIGN.md, "When
// Redis fails", "Policy `local` cannot be exact across a failover"), so
// two concurrent acquires at two amounts on two instances each hold a slot
// at their own amount there. While a limits document reaches the
// instances (each applies it within a second: docs/OPERATIONS.md,
// "Changing a channel limit"), it may also repeat an acquisition checked
// under the other document when the two documents have no window of the
// key in common (a calendar's zone or cutoff names another period's key):
// each acquire was then held in its own document's windows.
//
// Property one-pay-on-the-wire (docs/DESIGN.md "POST /pay": "the channel
// is called at most once per requestId"): the ledger holds at most one pay
// line per requestId and channel, whatever its outcome. Each line is a
// request the channel received, so a repeat counts even where the
// gateway's idempotency made it harmless (single-pay counts processings).
//
// Paths: the report counts the history's limiter checks (pinned payments
// and acquisitions answered 200 or 429, under the rules in force when sent)
// by the shape of the windows checked: plain (one sliding count window of
// the key's own, no reservation, adaptive off: the limiter's plain
// script), and otherwise each of several windows, channel-wide
// reservations, calendar, amount and learned that the check meets.
//
// Property amount-counted (the brief's money rule "the amount the limiter
// counted is the amount paid"): a member of a window that holds amounts (a
// calendar hash's value; a sliding window's amount, which the runner reads
// from its ":v" hash) and belongs to an order on that channel holds exactly
// the order's amount.
//
// Property 5, no-false-refusal: a 429 with details.reason channelThrottled
// follows a THROTTLED pay of its requestId in the ledger; any other 429
// (pinned, acquire, or each limited candidate of a routed payment) had a
// window that could have been too full for it at some instant from its
// invocation less NearCacheHold to its answer: a closed key, an amount over
// the cap, or the possible use (every slot that may have been in the window
// then, releases not subtracted, answers lost included) plus its weight and
// the unmet reservations above the limit. During a Redis fault any 429 is
// accepted; after one, under local, the possible use is raised by (N-1)
// times the admissions made during it that may still be in the window (the
// estimate of the in-process admissions, docs/DESIGN.md "Back to Redis").
// A 503 overlaps a fault of any kind, lengthened by FaultSlack, or is the
// limiter store's (details.dependency redis) and lasted at least the
// limiter's deadline (PAYSERVER_LIMITER_TIMEOUT: on a loaded host a check
// past it is decided by the policy, docs/PERFORMANCE.md).
// A learned limit (docs/OPERATIONS.md, "Limits learned from the channel")
// is bounded rather than replayed: a 429 with room in every configured
// window is justified when the channel answered THROTTLED to some pay
// within ⌈1/increase⌉ windows of the key's longest learning window (plus
// FaultSlack for the channel's retry-after) before the answer; the
// document's adaptive section says which keys learn and how fast.
package witness
