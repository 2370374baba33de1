package stats

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"payserver/internal/iso4217"
)

// AmountCounts is what the limiter decided for the requests with an
// amount of one channel and currency over some interval: how many it
// admitted and refused, and the sum of their amounts (minor units). A
// request admitted by a key in shadow mode counts as admitted. An amount
// given back after the channel declined the payment stays admitted: it is
// what the limiter let through.
type AmountCounts struct {
	Admitted       int64
	AdmittedAmount int64
	Refused        int64
	RefusedAmount  int64
}

// Add adds o to c.
func (c *AmountCounts) Add(o AmountCounts) {
	c.Admitted += o.Admitted
	c.AdmittedAmount += o.AdmittedAmount
	c.Refused += o.Refused
	c.RefusedAmount += o.RefusedAmount
}

// AmountRow is the amounts of one channel and currency in one minute, the
// unit an AmountStore persists. Channel is Other for a channel the limits
// document does not name; Currency is Other for a code that is not three
// upper-case letters.
type AmountRow struct {
	Minute   time.Time
	Channel  string
	Currency string
	AmountCounts
}

// AmountStore persists and reads amount rows. AddAmounts must add each
// row's counts to what is stored for its minute, channel and currency,
// never overwrite them, and be all or nothing. AmountBuckets returns the
// buckets of q (its From, To, Channel and Granularity; q.BizType must be
// empty) sorted by start, channel and currency.
type AmountStore interface {
	AddAmounts(ctx context.Context, rows []AmountRow) error
	AmountBuckets(ctx context.Context, q Query) ([]AmountBucket, error)
}

// AmountBucket is the summed amounts of one channel and currency over one
// report bucket.
type AmountBucket struct {
	Start    time.Time `json:"bucket"`
	Channel  string    `json:"channel"`
	Currency string    `json:"currency"`
	// Admitted and Refused count the requests; the amounts sum theirs, in
	// minor units of Currency.
	Admitted       int64 `json:"admitted"`
	AdmittedAmount int64 `json:"admittedAmount"`
	Refused        int64 `json:"refused"`
	RefusedAmount  int64 `json:"refusedAmount"`
}

// MarshalJSON writes the bucket with, beside each amount in minor units,
// the same amount in major units of Currency as a decimal string
// (admittedAmountMajor, refusedAmountMajor; iso4217.Major). They are
// absent for currency Other, whose sums add minor units of different
// currencies.
func (b AmountBucket) MarshalJSON() ([]byte, error) {
	type plain AmountBucket
	return json.Marshal(struct {
		plain
		AdmittedAmountMajor string `json:"admittedAmountMajor,omitempty"`
		RefusedAmountMajor  string `json:"refusedAmountMajor,omitempty"`
	}{plain(b), b.major(b.AdmittedAmount), b.major(b.RefusedAmount)})
}

// major returns n in major units of the bucket's currency, or "" when it
// has none.
func (b AmountBucket) major(n int64) string {
	m, _ := iso4217.Major(n, b.Currency)
	return m
}

// AmountReport is the amounts the limiter admitted and refused per channel
// and currency, as GET /reports/channel-amounts answers it.
type AmountReport struct {
	From        time.Time      `json:"from"`
	To          time.Time      `json:"to"`
	Granularity Granularity    `json:"granularity"`
	Rows        []AmountBucket `json:"rows"`
}

// ErrAmountsByBizType refuses an amounts query for one bizType: amounts
// are counted per channel.
var ErrAmountsByBizType = errors.New("stats: amounts are counted per channel, not per bizType")

// Amounts flushes this instance's pending counts (when a Flusher is set),
// then reads the amount buckets of q. It needs ReporterOptions.Amounts.
func (r *Reporter) Amounts(ctx context.Context, q Query) (AmountReport, error) {
	if r.opts.Amounts == nil {
		return AmountReport{}, errors.New("stats: no amount store")
	}
	if q.BizType != "" {
		return AmountReport{}, ErrAmountsByBizType
	}
	if r.opts.Flusher != nil {
		if err := r.opts.Flusher.Flush(ctx); err != nil {
			return AmountReport{}, err
		}
	}
	rows, err := r.opts.Amounts.AmountBuckets(ctx, q)
	if err != nil {
		return AmountReport{}, err
	}
	if rows == nil {
		rows = []AmountBucket{}
	}
	return AmountReport{From: q.From, To: q.To, Granularity: q.Granularity, Rows: rows}, nil
}

// amountSlot is one minute (Unix seconds of its start) of one channel and
// currency.
type amountSlot struct {
	minute            int64
	channel, currency string
}

// currencyLabel returns c when it looks like an ISO 4217 code, else Other,
// so that caller input never adds unbounded rows.
func currencyLabel(c string) string {
	if len(c) != 3 {
		return Other
	}
	for i := 0; i < 3; i++ {
		if c[i] < 'A' || c[i] > 'Z' {
			return Other
		}
	}
	return c
}
