package repo

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"time"

	"gorm.io/gorm"

	"payserver/internal/decisionlog"
	"payserver/internal/ratelimit"
)

// DecisionLog implements decisionlog.Store on the decision_log and
// limit_documents tables, and reads them back for replays (internal/whatif).
type DecisionLog struct {
	db *gorm.DB
}

var _ decisionlog.Store = (*DecisionLog)(nil)

// NewDecisionLog returns the decision log on db.
func NewDecisionLog(db *gorm.DB) (*DecisionLog, error) {
	if db == nil {
		return nil, errors.New("repo: nil db")
	}
	return &DecisionLog{db: db}, nil
}

const decisionColumns = "at_us, kind, biz_type, channel, member, merchant, amount, currency, outcome, source, version"

// maxInsertRows is the most rows of one INSERT of the decision log.
const maxInsertRows = 512

// insertRows is how many of n entries the next INSERT writes: the largest
// power of two up to n and maxInsertRows. With prepared statements on
// (Open), each INSERT's text is a statement of its own on every connection
// that runs it, and MariaDB caps them server-wide
// (max_prepared_stmt_count): powers of two keep them to 10 per
// connection whatever the batches' sizes.
func insertRows(n int) int { return 1 << (bits.Len(uint(min(n, maxInsertRows))) - 1) }

// Insert implements decisionlog.Store: multi-row INSERTs of insertRows
// rows each, each its own commit (in one transaction, database/sql would
// prepare each statement again on every call: a transaction's statements
// close with it). A failure leaves the INSERTs before it written. They go
// to the connection pool as the order store's hot statements do (gorm's
// Exec would rebuild each from its placeholders, argument by argument, and
// log it: the slow-statement warning does not cover them).
func (s *DecisionLog) Insert(ctx context.Context, entries []decisionlog.Entry) error {
	for written := 0; written < len(entries); {
		n := insertRows(len(entries) - written)
		if _, err := s.db.ConnPool.ExecContext(ctx, insertDecisionsSQL(n), decisionArgs(entries[written:written+n])...); err != nil {
			return fmt.Errorf("repo: write decision log (%d of %d entries written): %w", written, len(entries), err)
		}
		written += n
	}
	return nil
}

// insertDecisionsSQL is the INSERT of n decision log rows.
func insertDecisionsSQL(n int) string {
	const row = "(?,?,?,?,?,?,?,?,?,?,?)"
	var b strings.Builder
	b.Grow(64 + len(decisionColumns) + n*(len(row)+1))
	b.WriteString("INSERT INTO decision_log (" + decisionColumns + ") VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	return b.String()
}

// decisionArgs are the values of entries' rows, in decisionColumns' order.
func decisionArgs(entries []decisionlog.Entry) []any {
	args := make([]any, 0, 11*len(entries))
	for _, e := range entries {
		args = append(args, e.At.UnixMicro(), string(e.Kind), e.Key.BizType, e.Key.Channel, e.Member, e.Merchant,
			e.Amount, e.Currency, string(e.Outcome), string(e.Source), e.Version)
	}
	return args
}

// Prune implements decisionlog.Store.
func (s *DecisionLog) Prune(ctx context.Context, before time.Time, limit int) (int, error) {
	q := "DELETE FROM decision_log WHERE at_us < ? ORDER BY at_us LIMIT ?"
	if s.db.Dialector.Name() == "sqlite" {
		q = "DELETE FROM decision_log WHERE id IN (SELECT id FROM decision_log WHERE at_us < ? ORDER BY at_us LIMIT ?)"
	}
	res := s.db.WithContext(ctx).Exec(q, before.UnixMicro(), limit)
	if res.Error != nil {
		return 0, fmt.Errorf("repo: prune decision log: %w", res.Error)
	}
	return int(res.RowsAffected), nil
}

// SaveDocument implements decisionlog.Store.
func (s *DecisionLog) SaveDocument(ctx context.Context, version string, content []byte, at time.Time) error {
	q := "INSERT IGNORE INTO limit_documents (version, applied_at, content) VALUES (?, ?, ?)"
	if s.db.Dialector.Name() == "sqlite" {
		q = "INSERT OR IGNORE INTO limit_documents (version, applied_at, content) VALUES (?, ?, ?)"
	}
	if err := s.db.WithContext(ctx).Exec(q, version, at.UTC(), string(content)).Error; err != nil {
		return fmt.Errorf("repo: keep limits document %s: %w", version, err)
	}
	return nil
}

// Documents returns every limits document kept, by version.
func (s *DecisionLog) Documents(ctx context.Context) (map[string][]byte, error) {
	var rows []struct {
		Version string
		Content string
	}
	if err := s.db.WithContext(ctx).Raw("SELECT version, content FROM limit_documents").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("repo: read limits documents: %w", err)
	}
	out := make(map[string][]byte, len(rows))
	for _, r := range rows {
		out[r.Version] = []byte(r.Content)
	}
	return out, nil
}

// where returns the condition and arguments selecting f's entries: its
// interval, and, when it names keys, every entry of their channels (a
// key's channel-wide windows are shared with its channel's other keys).
func (f decisionFilter) where() (string, []any) {
	cond := "at_us >= ? AND at_us < ?"
	args := []any{f.From.UnixMicro(), f.To.UnixMicro()}
	if len(f.Keys) > 0 {
		seen := map[string]bool{}
		var marks []string
		for _, k := range f.Keys {
			if !seen[k.Channel] {
				seen[k.Channel] = true
				marks = append(marks, "?")
				args = append(args, k.Channel)
			}
		}
		cond += " AND channel IN (" + strings.Join(marks, ",") + ")"
	}
	return cond, args
}

type decisionFilter decisionlog.Filter

// Count returns how many entries f selects (its keys' channels whole).
func (s *DecisionLog) Count(ctx context.Context, f decisionlog.Filter) (int64, error) {
	cond, args := decisionFilter(f).where()
	var n int64
	if err := s.db.WithContext(ctx).Raw("SELECT COUNT(*) FROM decision_log WHERE "+cond, args...).Scan(&n).Error; err != nil {
		return 0, fmt.Errorf("repo: count decision log: %w", err)
	}
	return n, nil
}

// Stream calls fn with every entry f selects (its keys' channels whole),
// in order of instant then id, reading them one row at a time: never all
// in memory. An error from fn stops the stream and is returned.
func (s *DecisionLog) Stream(ctx context.Context, f decisionlog.Filter, fn func(decisionlog.Entry) error) error {
	cond, args := decisionFilter(f).where()
	rows, err := s.db.WithContext(ctx).Raw("SELECT id, "+decisionColumns+" FROM decision_log WHERE "+cond+" ORDER BY at_us, id", args...).Rows()
	if err != nil {
		return fmt.Errorf("repo: read decision log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e decisionlog.Entry
		var at int64
		var kind, outcome, source string
		if err := rows.Scan(&e.ID, &at, &kind, &e.Key.BizType, &e.Key.Channel, &e.Member, &e.Merchant, &e.Amount,
			&e.Currency, &outcome, &source, &e.Version); err != nil {
			return fmt.Errorf("repo: read decision log: %w", err)
		}
		e.At, e.Kind, e.Outcome, e.Source = time.UnixMicro(at), decisionlog.Kind(kind), decisionlog.Outcome(outcome), ratelimit.Source(source)
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("repo: read decision log: %w", err)
	}
	return nil
}
