package repo

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/glebarez/go-sqlite"
	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"payserver/internal/pay"
)

// orderRow is the orders table as gorm sees it.
type orderRow struct {
	ID             uint64 `gorm:"primaryKey"`
	OrderNo        string
	RequestID      string
	RequestHash    string
	BizType        string
	Channel        string
	MerchantID     string
	Amount         int64
	Currency       string
	Subject        string
	Status         string
	ChannelTradeNo string
	FailureCode    string
	FailureMessage string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// RoutedFrom is the routed payment's skipped candidates as JSON, '' for
	// a pinned payment (routedFromColumn).
	RoutedFrom string
	// The limiter's admission (µs, comma-separated keys, version) and the
	// resolution of an unknown outcome (migration 00008).
	AdmittedAtUs  int64
	AdmittedKeys  string
	LimitsVersion string
	ResolvedBy    string
	ResolvedAtUs  int64
	// A channel's word contradicting the final order (migration 00009).
	DiscrepancyChannel  string
	DiscrepancyReported string
	DiscrepancyTradeNo  string
	DiscrepancyAtUs     int64
}

func (orderRow) TableName() string { return "orders" }

// Orders implements pay.OrderStore on gorm.
type Orders struct {
	db *gorm.DB
	// group is nil unless OrdersOptions turned on group commit or batched
	// reads (see orders_batch.go).
	group *orderGroups
}

// NewOrders returns the order store on db with the default OrdersOptions
// (DefaultOrdersOptions).
func NewOrders(db *gorm.DB) (*Orders, error) {
	return NewOrdersWithOptions(db, DefaultOrdersOptions())
}

// NewOrdersWithOptions returns the order store on db.
func NewOrdersWithOptions(db *gorm.DB, opts OrdersOptions) (*Orders, error) {
	if db == nil {
		return nil, errors.New("repo: nil db")
	}
	s := &Orders{db: db}
	if opts.GroupCommit || opts.BatchGets {
		g, err := newOrderGroups(s, opts)
		if err != nil {
			return nil, err
		}
		s.group = g
	}
	return s, nil
}

var _ pay.OrderStore = (*Orders)(nil)

// Get, Create and Finish run on every payment; MarkStaleUnknown once a
// minute. They all send fixed SQL (the sweep's UPDATE in a few sizes, as
// the batches'), the
// statements gorm would build, straight to gorm's prepared-statement pool:
// profiles of POST /pay showed gorm's per-call statement building,
// reflection and trace logging at about a sixth of payserver's CPU. Errors
// and slow statements still go to gorm's logger (see trace).
const (
	orderColumns = "order_no, request_id, request_hash, biz_type, channel, merchant_id, amount, currency, subject, " +
		"status, channel_trade_no, failure_code, failure_message, created_at, updated_at, routed_from, " +
		"admitted_at_us, admitted_keys, limits_version, resolved_by, resolved_at_us, " +
		"discrepancy_channel, discrepancy_reported, discrepancy_trade_no, discrepancy_at_us"
	// orderRowValues is one row's placeholders for orderColumns.
	orderRowValues = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	getOrderSQL    = "SELECT " + orderColumns + " FROM orders WHERE request_id = ?"
	createOrderSQL = "INSERT INTO orders (" + orderColumns + ") VALUES " + orderRowValues
	finishOrderSQL = "UPDATE orders SET status = ?, channel_trade_no = ?, failure_code = ?, failure_message = ?, updated_at = ? " +
		"WHERE request_id = ? AND order_no = ? AND status IN (?, ?)"
	// staleIDsSQL is the sweeper's first step (MarkStaleUnknown): a plain,
	// non-locking read of the stale orders' ids through the (status,
	// updated_at) index.
	staleIDsSQL = "SELECT id FROM orders WHERE status = ? AND updated_at < ? LIMIT ?"
)

// staleBatch bounds the orders one sweep statement turns UNKNOWN.
const staleBatch = 500

// traceAfter is the age past which a hot-path statement is handed to gorm's
// logger, which logs it if it passed its own slow threshold (200ms).
const traceAfter = 100 * time.Millisecond

// trace hands a failed or slow statement to gorm's logger, as gorm itself
// would; fast successful ones skip it.
func (s *Orders) trace(ctx context.Context, begin time.Time, query string, err error) {
	if err != nil || time.Since(begin) > traceAfter {
		s.db.Logger.Trace(ctx, begin, func() (string, int64) { return query, -1 }, err)
	}
}

// translate maps a driver error to gorm's (gorm.ErrDuplicatedKey), as gorm
// itself would.
func (s *Orders) translate(err error) error {
	if t, ok := s.db.Dialector.(gorm.ErrorTranslator); ok && err != nil {
		return t.Translate(err)
	}
	return err
}

// Get implements pay.OrderStore.
func (s *Orders) Get(ctx context.Context, requestID string) (*pay.Order, error) {
	if s.group != nil && s.group.gets != nil {
		return s.group.gets.Do(ctx, requestID)
	}
	return s.getOne(ctx, requestID)
}

// getOne is Get as one statement of its own.
func (s *Orders) getOne(ctx context.Context, requestID string) (*pay.Order, error) {
	var r orderRow
	begin := time.Now()
	// Not QueryRowContext: gorm's prepared-statement pool answers it with an
	// empty sql.Row when the statement cannot be prepared (database down or
	// closed), and Scan on that panics.
	rows, err := s.db.ConnPool.QueryContext(ctx, getOrderSQL, requestID)
	if err == nil {
		err = scanOne(rows, &r)
	}
	if errors.Is(err, sql.ErrNoRows) {
		s.trace(ctx, begin, getOrderSQL, nil)
		return nil, pay.ErrOrderNotFound
	}
	s.trace(ctx, begin, getOrderSQL, err)
	if err != nil {
		return nil, fmt.Errorf("repo: get order: %w", err)
	}
	return r.order(), nil
}

// scanOne scans the first row of rows into r, or returns sql.ErrNoRows, and
// closes rows.
func scanOne(rows *sql.Rows, r *orderRow) error {
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := r.scan(rows); err != nil {
		return err
	}
	return rows.Close()
}

// scan reads one row of orderColumns, then the columns selected after
// them into more.
func (r *orderRow) scan(rows *sql.Rows, more ...any) error {
	return rows.Scan(append([]any{&r.OrderNo, &r.RequestID, &r.RequestHash,
		&r.BizType, &r.Channel, &r.MerchantID, &r.Amount, &r.Currency, &r.Subject,
		&r.Status, &r.ChannelTradeNo, &r.FailureCode, &r.FailureMessage, &r.CreatedAt, &r.UpdatedAt, &r.RoutedFrom,
		&r.AdmittedAtUs, &r.AdmittedKeys, &r.LimitsVersion, &r.ResolvedBy, &r.ResolvedAtUs,
		&r.DiscrepancyChannel, &r.DiscrepancyReported, &r.DiscrepancyTradeNo, &r.DiscrepancyAtUs}, more...)...)
}

// values are r's values for orderColumns, in order.
func (r *orderRow) values() []any {
	return []any{r.OrderNo, r.RequestID, r.RequestHash, r.BizType, r.Channel, r.MerchantID, r.Amount,
		r.Currency, r.Subject, r.Status, r.ChannelTradeNo, r.FailureCode, r.FailureMessage, r.CreatedAt, r.UpdatedAt, r.RoutedFrom,
		r.AdmittedAtUs, r.AdmittedKeys, r.LimitsVersion, r.ResolvedBy, r.ResolvedAtUs,
		r.DiscrepancyChannel, r.DiscrepancyReported, r.DiscrepancyTradeNo, r.DiscrepancyAtUs}
}

// storedPrecision is the precision of the orders table's times: MariaDB's
// DATETIME(6) keeps whole microseconds. SQLite would keep the driver's
// nanoseconds; they are cut to the same precision so both answer alike.
const storedPrecision = time.Microsecond

// stored returns t as the orders table keeps it: UTC, whole microseconds
// (cut, not rounded, as MariaDB does by default; MySQL would round).
func stored(t time.Time) time.Time { return t.UTC().Truncate(storedPrecision) }

// Create implements pay.OrderStore. It returns nil only once the row is
// committed, with group commit too. It sets o's times to what is stored.
func (s *Orders) Create(ctx context.Context, o *pay.Order) error {
	r := rowOf(o)
	o.CreatedAt, o.UpdatedAt = r.CreatedAt, r.UpdatedAt
	if s.group != nil && s.group.creates != nil {
		_, err := s.group.creates.Do(ctx, r)
		return err
	}
	return s.createOne(ctx, r)
}

// createOne is Create as one single-row autocommit INSERT.
func (s *Orders) createOne(ctx context.Context, r orderRow) error {
	begin := time.Now()
	_, err := s.db.ConnPool.ExecContext(ctx, createOrderSQL, r.values()...)
	s.trace(ctx, begin, createOrderSQL, err)
	err = s.translate(err)
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return pay.ErrDuplicateOrder
	}
	if err != nil {
		return createFailed(err)
	}
	return nil
}

// createFailed wraps an INSERT's error, with pay.ErrNotCommitted when it
// proves that nothing was committed (see notCommitted).
func createFailed(err error) error {
	if notCommitted(err) {
		return fmt.Errorf("repo: create order: %w: %w", pay.ErrNotCommitted, err)
	}
	return fmt.Errorf("repo: create order: %w", err)
}

// notCommitted reports whether err, from an autocommit statement, proves
// that the statement changed nothing:
//   - MariaDB answered it with an error: the statement was rolled back;
//   - SQLite answered it with an error (it runs in this process: an error
//     from the engine means the statement was rolled back);
//   - the connection could not be made (a dial error), or database/sql
//     gave up with driver.ErrBadConn, which the MySQL driver returns only
//     when nothing was written to the server.
//
// A connection lost mid-statement, a timeout or an ended context prove
// nothing: the statement may have been committed without its answer
// arriving.
func notCommitted(err error) bool {
	var myErr *mysql.MySQLError
	var liteErr *sqlite.Error
	var netErr *net.OpError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.As(err, &myErr), errors.As(err, &liteErr), errors.Is(err, driver.ErrBadConn):
		return true
	case errors.As(err, &netErr):
		return netErr.Op == "dial"
	}
	return false
}

// Finish implements pay.OrderStore. It sets o.UpdatedAt to what is stored.
func (s *Orders) Finish(ctx context.Context, o *pay.Order) error {
	if err := pay.CheckFinish(o); err != nil {
		return err
	}
	f := outcomeOf(o)
	o.UpdatedAt = f.UpdatedAt
	if s.group != nil && s.group.finishes != nil {
		_, err := s.group.finishes.Do(ctx, f)
		return err
	}
	return s.finishOne(ctx, f)
}

// outcome is what Finish writes, copied from the order when Finish is
// called.
type outcome struct {
	RequestID, OrderNo, Status, ChannelTradeNo, FailureCode, FailureMessage string
	UpdatedAt                                                               time.Time
}

func outcomeOf(o *pay.Order) outcome {
	return outcome{RequestID: o.RequestID, OrderNo: o.OrderNo, Status: string(o.Status), ChannelTradeNo: o.ChannelTradeNo,
		FailureCode: o.FailureCode, FailureMessage: o.FailureMessage, UpdatedAt: stored(o.UpdatedAt)}
}

// finishOne is Finish as one autocommit UPDATE.
func (s *Orders) finishOne(ctx context.Context, f outcome) error {
	begin := time.Now()
	res, err := s.db.ConnPool.ExecContext(ctx, finishOrderSQL, f.Status, f.ChannelTradeNo, f.FailureCode,
		f.FailureMessage, f.UpdatedAt, f.RequestID, f.OrderNo, string(pay.StatusProcessing), string(pay.StatusUnknown))
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	s.trace(ctx, begin, finishOrderSQL, err)
	if err != nil {
		return fmt.Errorf("repo: finish order: %w", err)
	}
	if n == 0 {
		return pay.ErrOrderNotFound
	}
	return nil
}

// MarkStaleUnknown implements pay.OrderStore. It sends fixed SQL through
// gorm's pool like the hot path, so the whole order store has one
// data-access style (docs/PERFORMANCE.md, "One data-access style").
//
// It sweeps in two steps, so that it never waits for a fresh order's
// outcome: a plain read finds the stale orders' ids, and an UPDATE by
// primary key turns them UNKNOWN, checking again that each is still
// PROCESSING and stale. One UPDATE with that condition would scan the
// (status, updated_at) index under locks, and InnoDB also locks the entry
// just past the range: the oldest fresh PROCESSING order, whose outcome is
// being recorded. The sweep then waited for that outcome's commit, or
// deadlocked with its batch, which then fell back to one statement per
// order (seen under load in bench-e2e;
// TestMarkStaleNeverWaitsForAPaymentInFlight). Only a stale order's own
// late outcome can still make it wait, for that row alone.
func (s *Orders) MarkStaleUnknown(ctx context.Context, cutoff time.Time) (int64, error) {
	var total int64
	for {
		n, found, err := s.markStaleBatch(ctx, cutoff.UTC())
		total += n
		if err != nil {
			return total, fmt.Errorf("repo: mark stale orders: %w", err)
		}
		// Fewer than a batch found: none left. None changed: the rest are
		// no longer stale, and reading them again would find them again.
		if found < staleBatch || n == 0 {
			return total, nil
		}
	}
}

// markStaleBatch turns up to staleBatch stale orders UNKNOWN: it returns how
// many it changed and how many it found.
func (s *Orders) markStaleBatch(ctx context.Context, cutoff time.Time) (changed int64, found int, err error) {
	begin := time.Now()
	rows, err := s.db.ConnPool.QueryContext(ctx, staleIDsSQL, string(pay.StatusProcessing), cutoff, staleBatch)
	if err != nil {
		s.trace(ctx, begin, staleIDsSQL, err)
		return 0, 0, err
	}
	args := []any{string(pay.StatusUnknown), "OUTCOME_NOT_RECORDED",
		"the channel outcome was not recorded in time; reconcile with the channel", stored(time.Now())}
	for rows.Next() {
		var id uint64
		if err = rows.Scan(&id); err != nil {
			break
		}
		args = append(args, id)
	}
	if err == nil {
		err = rows.Err()
	}
	_ = rows.Close()
	s.trace(ctx, begin, staleIDsSQL, err)
	found = len(args) - 4
	if err != nil || found == 0 {
		return 0, found, err
	}
	// Padded to a power of two by repeating the last id, which changes
	// nothing, so that few statement texts are prepared.
	for n := padded(found); len(args)-4 < n; {
		args = append(args, args[len(args)-1])
	}
	query := markStaleSQL(s.db.Dialector.Name(), len(args)-4)
	args = append(args, string(pay.StatusProcessing), cutoff)
	begin = time.Now()
	res, err := s.db.ConnPool.ExecContext(ctx, query, args...)
	if err == nil {
		changed, err = res.RowsAffected()
	}
	s.trace(ctx, begin, query, err)
	return changed, found, err
}

// markStaleSQL turns n orders UNKNOWN by primary key, if they are still
// PROCESSING and stale; on MariaDB through the primary key only, so that it
// locks those rows and nothing else.
func markStaleSQL(dialect string, n int) string {
	table := "orders"
	if dialect == "mysql" {
		table = "orders FORCE INDEX (PRIMARY)"
	}
	return "UPDATE " + table + " SET status = ?, failure_code = ?, failure_message = ?, updated_at = ? WHERE id IN (?" +
		strings.Repeat(", ?", n-1) + ") AND status = ? AND updated_at < ?"
}

// Ping implements pay.OrderStore.
func (s *Orders) Ping(ctx context.Context) error { return Ping(ctx, s.db) }

func rowOf(o *pay.Order) orderRow {
	r := orderRow{
		OrderNo: o.OrderNo, RequestID: o.RequestID, RequestHash: o.RequestHash,
		BizType: o.BizType, Channel: o.Channel, MerchantID: o.MerchantID,
		Amount: o.Amount, Currency: o.Currency, Subject: o.Subject,
		Status: string(o.Status), ChannelTradeNo: o.ChannelTradeNo,
		FailureCode: o.FailureCode, FailureMessage: o.FailureMessage,
		CreatedAt: stored(o.CreatedAt), UpdatedAt: stored(o.UpdatedAt),
		RoutedFrom:   routedFromColumn(o.RoutedFrom),
		AdmittedAtUs: unixMicro(o.Admission.At), AdmittedKeys: keysColumn(o.Admission.Keys),
		LimitsVersion: o.Admission.LimitsVersion,
		ResolvedBy:    o.ResolvedBy, ResolvedAtUs: unixMicro(o.ResolvedAt),
	}
	if d := o.Discrepancy; d != nil {
		r.DiscrepancyChannel, r.DiscrepancyReported, r.DiscrepancyTradeNo, r.DiscrepancyAtUs = d.Channel, d.Reported, d.TradeNo, unixMicro(d.At)
	}
	return r
}

// admittedKeysMax is the admitted_keys column's size.
const admittedKeysMax = 1024

// keysColumn joins keys with commas, keeping only the whole keys that fit
// in the column: a long list never makes the order's INSERT fail.
func keysColumn(keys []string) string {
	s := strings.Join(keys, ",")
	for len(s) > admittedKeysMax {
		i := strings.LastIndexByte(s, ',')
		if i < 0 {
			return ""
		}
		s = s[:i]
	}
	return s
}

// unixMicro is t in Unix µs, 0 for the zero time; timeOfMicro the reverse.
func unixMicro(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func timeOfMicro(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

func (r orderRow) order() *pay.Order {
	return &pay.Order{
		OrderNo: r.OrderNo, RequestID: r.RequestID, RequestHash: r.RequestHash,
		BizType: r.BizType, Channel: r.Channel, MerchantID: r.MerchantID,
		Amount: r.Amount, Currency: r.Currency, Subject: r.Subject,
		Status: pay.Status(r.Status), ChannelTradeNo: r.ChannelTradeNo,
		FailureCode: r.FailureCode, FailureMessage: r.FailureMessage,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		RoutedFrom: routedFromOf(r.RoutedFrom),
		Admission:  admissionOf(r),
		ResolvedBy: r.ResolvedBy, ResolvedAt: timeOfMicro(r.ResolvedAtUs),
		Discrepancy: discrepancyOf(r),
	}
}

func discrepancyOf(r orderRow) *pay.Discrepancy {
	if r.DiscrepancyAtUs == 0 {
		return nil
	}
	return &pay.Discrepancy{Channel: r.DiscrepancyChannel, Reported: r.DiscrepancyReported,
		TradeNo: r.DiscrepancyTradeNo, At: timeOfMicro(r.DiscrepancyAtUs)}
}

func admissionOf(r orderRow) pay.Admission {
	a := pay.Admission{At: timeOfMicro(r.AdmittedAtUs), LimitsVersion: r.LimitsVersion}
	if r.AdmittedKeys != "" {
		a.Keys = strings.Split(r.AdmittedKeys, ",")
	}
	return a
}
