package stats

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/configcenter"
	"payserver/internal/ratelimit"
)

// Bucket is the summed counts of one key over one report bucket, as a
// Reader returns them.
type Bucket struct {
	// Start is the bucket's start, in UTC.
	Start time.Time
	Key   ratelimit.Key
	// Rule is the rule recorded with the bucket's last stored minute: the
	// limit in force at its end.
	Rule string
	// RulesSeen is how many distinct rules the bucket's minutes recorded;
	// more than one means the limit changed inside the bucket.
	RulesSeen int
	Counts
}

// Reader reads stored counts back. Buckets returns the buckets of q (its
// From, To, BizType, Channel and Granularity) sorted by start, bizType and
// channel; only buckets with stored rows appear. EachBucket hands them to
// fn in the same order as they are read, holding none, and stops at fn's
// first error. Both read at most q.MaxRows+1 buckets when q.MaxRows is
// positive. MoreBucketsThan reports whether q has more than n buckets.
type Reader interface {
	Buckets(ctx context.Context, q Query) ([]Bucket, error)
	EachBucket(ctx context.Context, q Query, fn func(Bucket) error) error
	MoreBucketsThan(ctx context.Context, q Query, n int) (bool, error)
}

// ChangeLister lists applied limits changes in [from, to), oldest first, at
// most limit of them. *repo.LimitHistory implements it.
type ChangeLister interface {
	List(ctx context.Context, from, to time.Time, limit int) ([]configcenter.Change, error)
}

// Flusher writes this instance's pending counts. *Aggregator implements it.
type Flusher interface {
	Flush(ctx context.Context) error
}

// Report is a channel-limit report, as GET /reports/channel-limits answers it.
type Report struct {
	From        time.Time   `json:"from"`
	To          time.Time   `json:"to"`
	Granularity Granularity `json:"granularity"`
	Rows        []ReportRow `json:"rows"`
}

// ReportRow is one bucket of one key.
type ReportRow struct {
	BizType           string    `json:"bizType"`
	Channel           string    `json:"channel"`
	Bucket            time.Time `json:"bucket"`
	Attempts          int64     `json:"attempts"`
	Admitted          int64     `json:"admitted"`
	Limited           int64     `json:"limited"`
	ShadowLimited     int64     `json:"shadowLimited"`
	Degraded          int64     `json:"degraded"`
	Released          int64     `json:"released"`
	NearCacheRefusals int64     `json:"nearCacheRefusals"`
	// LimitedRate is Limited / Attempts, rounded to 4 decimals; 0 without
	// attempts.
	LimitedRate float64 `json:"limitedRate"`
	// PeakUtilization is the highest occupancy / limit seen, rounded to 4
	// decimals.
	PeakUtilization float64 `json:"peakUtilization"`
	// Limit is the rule in force at the end of the bucket, e.g. "100/1s".
	Limit string `json:"limit"`
	// LimitChanged says whether the key's rule changed inside the bucket:
	// limit_config_history recorded a change, or the stored minutes carry
	// different rules.
	LimitChanged bool `json:"limitChanged"`
	// LimitChanges lists the recorded changes in the bucket, "old -> new",
	// oldest first, without repeats.
	LimitChanges []string `json:"limitChanges"`
}

// maxChanges caps the history entries one report reads.
const maxChanges = 10_000

// changeLookback is how far before a report's start the history is read, to
// find the document in force when it starts.
const changeLookback = 7 * 24 * time.Hour

// ReporterOptions wires a Reporter. Reader is required.
type ReporterOptions struct {
	Reader Reader
	// History, when set, marks the buckets in which a key's limit changed.
	History ChangeLister
	// Flusher, when set, is flushed before each report, so the report
	// includes every count this instance has observed. Counts other
	// instances have not flushed yet (at most one flush interval old) are
	// not included.
	Flusher Flusher
	// Amounts, when set, serves the amounts report (Reporter.Amounts).
	Amounts AmountStore
	// Merchants, when set, serves the report grouped by merchant
	// (Reporter.Merchants).
	Merchants MerchantStore
	// InProgress, when set, adds to that report the merchant counts this
	// instance has not written yet. *Aggregator implements it.
	InProgress interface {
		MerchantsInProgress(q Query) []MerchantBucket
	}
}

// Reporter builds reports from stored counts.
type Reporter struct {
	opts ReporterOptions
}

// NewReporter returns a Reporter.
func NewReporter(opts ReporterOptions) (*Reporter, error) {
	if opts.Reader == nil {
		return nil, errors.New("stats: nil reader")
	}
	return &Reporter{opts: opts}, nil
}

// Report flushes this instance's pending counts (when a Flusher is set),
// then reads the buckets of q and marks limit changes.
func (r *Reporter) Report(ctx context.Context, q Query) (Report, error) {
	if r.opts.Flusher != nil {
		if err := r.opts.Flusher.Flush(ctx); err != nil {
			return Report{}, err
		}
	}
	buckets, err := r.opts.Reader.Buckets(ctx, q)
	if err != nil {
		return Report{}, err
	}
	if q.MaxRows > 0 && len(buckets) > q.MaxRows {
		return Report{}, tooManyRows(q.MaxRows, "have more than %d rows (one per key and bucket)")
	}
	changes, err := r.changes(ctx, q)
	if err != nil {
		return Report{}, err
	}
	rep := Report{From: q.From, To: q.To, Granularity: q.Granularity, Rows: make([]ReportRow, 0, len(buckets))}
	for _, b := range buckets {
		row := NewReportRow(b)
		if cs := changes[changeSlot{start: b.Start.Unix(), key: b.Key}]; len(cs) > 0 {
			row.LimitChanged, row.LimitChanges = true, cs
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// ReportWriter writes a report as Reporter.Stream produces it: its head
// (a Report without rows) once, then each row in order, then the end.
type ReportWriter interface {
	Head(rep Report) error
	Row(row ReportRow) error
	End() error
}

// Stream is Report written as it is read: it flushes this instance's
// pending counts (when a Flusher is set), counts q's rows against
// q.MaxRows, reads the limit changes, and only then writes the head and
// hands w each row as the Reader reads it, holding none of them. An error
// before the head is written is the caller's to answer (INVALID_REQUEST
// past the cap); after it, the answer is cut short.
func (r *Reporter) Stream(ctx context.Context, q Query, w ReportWriter) error {
	if r.opts.Flusher != nil {
		if err := r.opts.Flusher.Flush(ctx); err != nil {
			return err
		}
	}
	if q.MaxRows > 0 {
		more, err := r.opts.Reader.MoreBucketsThan(ctx, q, q.MaxRows)
		if err != nil {
			return err
		}
		if more {
			return tooManyRows(q.MaxRows, "have more than %d rows (one per key and bucket)")
		}
	}
	changes, err := r.changes(ctx, q)
	if err != nil {
		return err
	}
	if err := w.Head(Report{From: q.From, To: q.To, Granularity: q.Granularity}); err != nil {
		return err
	}
	rows := 0
	err = r.opts.Reader.EachBucket(ctx, q, func(b Bucket) error {
		if rows++; q.MaxRows > 0 && rows > q.MaxRows {
			// Rows written since the count took the report past its cap:
			// fail it rather than end it short as if whole.
			return fmt.Errorf("stats: the report grew past its cap of %d rows while it was read", q.MaxRows)
		}
		row := NewReportRow(b)
		if cs := changes[changeSlot{start: b.Start.Unix(), key: b.Key}]; len(cs) > 0 {
			row.LimitChanged, row.LimitChanges = true, cs
		}
		return w.Row(row)
	})
	if err != nil {
		return err
	}
	return w.End()
}

// tooManyRows is the INVALID_REQUEST of a report past its cap of max rows;
// what says what was past it, with a %d for max.
func tooManyRows(max int, what string) error {
	e := apperr.Invalid(apperr.FieldError{Field: "to", Reason: fmt.Sprintf(
		"the report would "+what+"; narrow from..to, use a coarser granularity, or name a bizType or channel", max)})
	e.Details["maxRows"] = max
	return e
}

// KeyChange is the recorded limit changes of one key in one report
// bucket, each "old -> new", oldest first.
type KeyChange struct {
	Bucket  time.Time
	Key     ratelimit.Key
	Changes []string
}

// Changes returns the limit changes recorded in the buckets of q (its From,
// To, BizType, Channel and Granularity) as Report marks them on its rows,
// but for every key the history names, whether or not it saw traffic:
// a key whose limit changed while nothing was counted has no row. They are
// sorted by bucket and key; there are none without a History.
func (r *Reporter) Changes(ctx context.Context, q Query) ([]KeyChange, error) {
	changes, err := r.changes(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]KeyChange, 0, len(changes))
	for s, cs := range changes {
		if (q.BizType == "" || q.BizType == s.key.BizType) && (q.Channel == "" || q.Channel == s.key.Channel) {
			out = append(out, KeyChange{Bucket: time.Unix(s.start, 0).UTC(), Key: s.key, Changes: cs})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Bucket.Equal(out[j].Bucket) {
			return out[i].Bucket.Before(out[j].Bucket)
		}
		return out[i].Key.String() < out[j].Key.String()
	})
	return out, nil
}

// changes reads the history of q's range (nil without a History) and
// groups its changes by bucket and key.
func (r *Reporter) changes(ctx context.Context, q Query) (map[changeSlot][]string, error) {
	if r.opts.History == nil {
		return nil, nil
	}
	list, err := r.opts.History.List(ctx, q.From.Add(-changeLookback), q.To, maxChanges)
	if err != nil {
		return nil, fmt.Errorf("stats: limits history: %w", err)
	}
	return changesByBucket(list, q.From, q.Granularity), nil
}

// NewReportRow derives a report row from a bucket: rates, rounding, and
// LimitChanged when the bucket saw more than one rule.
func NewReportRow(b Bucket) ReportRow {
	row := ReportRow{
		BizType: b.Key.BizType, Channel: b.Key.Channel, Bucket: b.Start.UTC(),
		Attempts: b.Attempts, Admitted: b.Admitted, Limited: b.Limited, ShadowLimited: b.ShadowLimited,
		Degraded: b.Degraded, Released: b.Released, NearCacheRefusals: b.NearCacheRefusals,
		PeakUtilization: round4(b.PeakUtilization), Limit: b.Rule,
		LimitChanged: b.RulesSeen > 1, LimitChanges: []string{},
	}
	if b.Attempts > 0 {
		row.LimitedRate = round4(float64(b.Limited) / float64(b.Attempts))
	}
	return row
}

func round4(f float64) float64 { return math.Round(f*10_000) / 10_000 }

type changeSlot struct {
	start int64
	key   ratelimit.Key
}

// changesByBucket groups the history entries ("BIZ:CH: old -> new") of kind
// change at or after from by bucket and key, every one in the order
// applied. Loads (an instance putting a document in force at its start),
// refusals and no-op edits are not changes. Every instance records each
// document it applies, so an entry whose document (md5) is the one recorded
// just before it is a re-application by another instance and is skipped;
// so is an entry equal to the previous one of its bucket and key (the same
// step reported twice cannot be a link of the chain).
func changesByBucket(list []configcenter.Change, from time.Time, g Granularity) map[changeSlot][]string {
	step := g.Duration()
	out := map[changeSlot][]string{}
	prevMD5 := ""
	for _, c := range list {
		if !c.Kind.IsChange() {
			continue
		}
		again := c.MD5 != "" && c.MD5 == prevMD5
		prevMD5 = c.MD5
		if again || c.At.Before(from) {
			continue
		}
		start := c.At.UTC().Truncate(step).Unix()
		for _, entry := range c.Keys {
			ks, diff, ok := strings.Cut(entry, ": ")
			if !ok {
				continue
			}
			k, err := ratelimit.ParseKey(ks)
			if err != nil {
				continue
			}
			s := changeSlot{start: start, key: k}
			if n := len(out[s]); n == 0 || out[s][n-1] != diff {
				out[s] = append(out[s], diff)
			}
		}
	}
	return out
}
