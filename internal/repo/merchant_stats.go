package repo

import (
	"context"
	"fmt"
	"time"

	"payserver/internal/stats"
)

var _ stats.MerchantStore = (*ChannelStats)(nil)

// merchantUpsert is the upsert of channel_merchant_stats.
var merchantUpsert = upsertSpec{
	table:    "channel_merchant_stats",
	columns:  []string{"minute", "biz_type", "channel", "merchant", "admitted", "refused", "updated_at"},
	conflict: "minute, biz_type, channel, merchant", summed: []string{"admitted", "refused"},
	mysql: []string{"updated_at = VALUES(updated_at)"}, sqlite: []string{"updated_at = excluded.updated_at"},
}

// AddMerchants implements stats.MerchantStore: one transaction of additive
// upserts, in the order given.
func (s *ChannelStats) AddMerchants(ctx context.Context, rows []stats.MerchantRow) error {
	if len(rows) == 0 {
		return nil
	}
	err := s.upsert(ctx, merchantUpsert, len(rows), func(i int, now time.Time) []any {
		r := rows[i]
		return []any{r.Minute.Unix(), r.Key.BizType, r.Key.Channel, r.Merchant, r.Admitted, r.Refused, now}
	})
	if err != nil {
		return fmt.Errorf("repo: add channel merchants: %w", err)
	}
	return nil
}

// MerchantBuckets implements stats.MerchantStore: counts summed in SQL
// per bucket, key and merchant.
func (s *ChannelStats) MerchantBuckets(ctx context.Context, q stats.Query) ([]stats.MerchantBucket, error) {
	step := int64(q.Granularity.Duration() / time.Second)
	if step <= 0 {
		return nil, fmt.Errorf("repo: channel merchants: unknown granularity %q", q.Granularity)
	}
	if len(q.Keys) > stats.MaxQueryKeys {
		return nil, fmt.Errorf("repo: channel merchants: %d keys asked, at most %d", len(q.Keys), stats.MaxQueryKeys)
	}
	where, args := keyWhere(q)
	// step comes from a fixed set of granularities, never from input text.
	query := fmt.Sprintf(`SELECT minute - (minute %% %[1]d) AS bucket, biz_type, channel, merchant, SUM(admitted), SUM(refused)
FROM channel_merchant_stats
WHERE %[2]s
GROUP BY bucket, biz_type, channel, merchant
ORDER BY bucket, biz_type, channel, merchant`, step, where)
	if q.MaxRows > 0 {
		// One more than the cap tells the report it is over.
		query += "\nLIMIT ?"
		args = append(args, q.MaxRows+1)
	}
	rows, err := s.db.WithContext(ctx).Raw(query, args...).Rows()
	if err != nil {
		return nil, fmt.Errorf("repo: query channel merchants: %w", err)
	}
	defer rows.Close()
	out := []stats.MerchantBucket{}
	for rows.Next() {
		var b stats.MerchantBucket
		var start int64
		if err := rows.Scan(&start, &b.Key.BizType, &b.Key.Channel, &b.Merchant, &b.Admitted, &b.Refused); err != nil {
			return nil, fmt.Errorf("repo: scan channel merchants: %w", err)
		}
		b.Start = time.Unix(start, 0).UTC()
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("repo: read channel merchants: %w", err)
	}
	return out, nil
}
