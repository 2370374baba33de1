package repo

import (
	"context"
	"fmt"
	"time"

	"payserver/internal/stats"
)

// amountColumns are the columns an amount upsert writes, in argument order.
var amountColumns = []string{"minute", "channel", "currency", "admitted", "admitted_amount", "refused", "refused_amount", "updated_at"}

// amountSummed are the counters an amount upsert adds to the stored row.
var amountSummed = []string{"admitted", "admitted_amount", "refused", "refused_amount"}

var _ stats.AmountStore = (*ChannelStats)(nil)

// amountUpsert is the upsert of channel_amount_stats.
var amountUpsert = upsertSpec{
	table: "channel_amount_stats", columns: amountColumns, conflict: "minute, channel, currency", summed: amountSummed,
	mysql: []string{"updated_at = VALUES(updated_at)"}, sqlite: []string{"updated_at = excluded.updated_at"},
}

// AddAmounts implements stats.AmountStore: one transaction of additive
// upserts, in the order given.
func (s *ChannelStats) AddAmounts(ctx context.Context, rows []stats.AmountRow) error {
	if len(rows) == 0 {
		return nil
	}
	err := s.upsert(ctx, amountUpsert, len(rows), func(i int, now time.Time) []any {
		r := rows[i]
		return []any{r.Minute.Unix(), r.Channel, r.Currency, r.Admitted, r.AdmittedAmount, r.Refused, r.RefusedAmount, now}
	})
	if err != nil {
		return fmt.Errorf("repo: add channel amounts: %w", err)
	}
	return nil
}

// AmountBuckets implements stats.AmountStore: amounts summed in SQL per
// bucket, channel and currency.
func (s *ChannelStats) AmountBuckets(ctx context.Context, q stats.Query) ([]stats.AmountBucket, error) {
	step := int64(q.Granularity.Duration() / time.Second)
	if step <= 0 {
		return nil, fmt.Errorf("repo: channel amounts: unknown granularity %q", q.Granularity)
	}
	where := "minute >= ? AND minute < ?"
	args := []any{q.From.Unix(), q.To.Unix()}
	if q.Channel != "" {
		where += " AND channel = ?"
		args = append(args, q.Channel)
	}
	// step comes from a fixed set of granularities, never from input text.
	query := fmt.Sprintf(`SELECT minute - (minute %% %[1]d) AS bucket, channel, currency,
  SUM(admitted), SUM(admitted_amount), SUM(refused), SUM(refused_amount)
FROM channel_amount_stats
WHERE %[2]s
GROUP BY bucket, channel, currency
ORDER BY bucket, channel, currency`, step, where)
	rows, err := s.db.WithContext(ctx).Raw(query, args...).Rows()
	if err != nil {
		return nil, fmt.Errorf("repo: query channel amounts: %w", err)
	}
	defer rows.Close()
	out := []stats.AmountBucket{}
	for rows.Next() {
		var b stats.AmountBucket
		var start int64
		if err := rows.Scan(&start, &b.Channel, &b.Currency, &b.Admitted, &b.AdmittedAmount, &b.Refused, &b.RefusedAmount); err != nil {
			return nil, fmt.Errorf("repo: scan channel amounts: %w", err)
		}
		b.Start = time.Unix(start, 0).UTC()
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("repo: read channel amounts: %w", err)
	}
	return out, nil
}
