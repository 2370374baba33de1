// Package stats counts what the channel limiter decided, per bizType+channel
// and per minute, and turns the counts into reports.
//
// An Aggregator observes every limiter decision (it implements
// ratelimit.Observer) and adds it to an in-memory map under a mutex: no I/O
// on the request path. Every few seconds, and once more at shutdown, it
// hands the pending rows to a Store, which adds them to durable rows with
// additive upserts, so that the counts of every instance sum up. A Reporter
// reads the stored rows back, bucketed by minute, hour or day.
//
// Cardinality is bounded: only keys the limits document names are counted
// under their own bizType and channel. Every other key (bizType is caller
// input) is counted under bizType Other, with its channel kept when the
// document names that channel for some bizType and Other otherwise.
package stats

import (
	"context"
	"time"

	"payserver/internal/ratelimit"
)

// Other is the bizType (and channel) under which keys the limits document
// does not name are counted. It is lower case, so it never equals a valid
// code.
const Other = "other"

// UnlimitedRule is the rule recorded for keys counted under Other: a key the
// document does not name is unlimited.
const UnlimitedRule = "unlimited"

// Counts is what the limiter decided for one key over some interval. Every
// decision is one attempt, and is either admitted or limited:
// Attempts == Admitted + Limited. ShadowLimited and Degraded are subsets of
// Admitted; NearCacheRefusals is a subset of Limited. Released counts slots
// given back because the channel was never called.
type Counts struct {
	Attempts          int64
	Admitted          int64
	Limited           int64
	ShadowLimited     int64 // refused by the rule but admitted: the key is in shadow mode
	Degraded          int64 // admitted by the degraded policy (local windows or fail-open)
	Released          int64
	NearCacheRefusals int64 // refused from the near-cache, without asking Redis
	// PeakUtilization is the highest window occupancy / limit seen after a
	// decision, usually in [0, 1]. Unlimited and closed (limit 0) keys
	// leave it 0.
	PeakUtilization float64
}

// Add adds o to c: counts are summed and the peak is the larger one.
func (c *Counts) Add(o Counts) {
	c.Attempts += o.Attempts
	c.Admitted += o.Admitted
	c.Limited += o.Limited
	c.ShadowLimited += o.ShadowLimited
	c.Degraded += o.Degraded
	c.Released += o.Released
	c.NearCacheRefusals += o.NearCacheRefusals
	c.PeakUtilization = max(c.PeakUtilization, o.PeakUtilization)
}

// Events returns how many observed events (decisions and releases) c holds.
func (c Counts) Events() int64 { return c.Attempts + c.Released }

// Row is the counts of one key in one minute, the unit a Store persists.
type Row struct {
	// Minute is the start of the minute, in UTC.
	Minute time.Time
	// Key is the counted key; its BizType (and Channel) may be Other.
	Key ratelimit.Key
	// Rule is the rule in force at the last event of the minute, as
	// configcenter.DescribeRule renders it ("100/1s", "unlimited", ...).
	Rule string
	Counts
}

// Store persists rows. Add must add each row's counts to what is stored
// for its minute and key (and keep the larger peak), never overwrite them,
// so that several instances can write the same minute. Add is all or
// nothing: on error nothing was stored.
type Store interface {
	Add(ctx context.Context, rows []Row) error
}
