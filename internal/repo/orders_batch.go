package repo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"payserver/internal/batch"
	"payserver/internal/pay"
)

// Group commit: concurrent calls of one kind share one round trip.
//
//   - Create: the rows of concurrent calls go out as one multi-row INSERT.
//     It runs in autocommit, so it is one transaction: every row of the
//     batch is committed, or none is. A caller gets nil only after that
//     commit.
//   - Finish: one UPDATE … SET col = CASE order_no WHEN … END … WHERE
//     request_id IN (…) AND order_no IN (…) AND status IN
//     ('PROCESSING','UNKNOWN'), inside a transaction. It commits only when
//     it changed exactly one row per call. Otherwise it rolls back and every call runs alone, so each one
//     gets exactly the answer its own UPDATE gives (ErrOrderNotFound when
//     no row was changed).
//   - Get (OrdersOptions.BatchGets): one SELECT … WHERE request_id IN (…).
//
// There is no timer and no linger. A call that finds its kind idle is sent
// at once, alone, with the single-row statement, in the caller's goroutine.
// Calls that arrive while a statement of their kind is in flight queue up,
// and when it returns they all go out together (at most MaxBatch), from a
// goroutine that runs until the queue is empty (internal/batch). So there
// is at most one statement of each kind in flight per Orders, and batches
// grow with load. More in flight was measured and gave nothing end to end
// (docs/decisions/0005-one-batch-in-flight.md).
//
// Failures:
//   - A batched INSERT refused by the database (a duplicate key, or any other
//     error the server answered with: nothing of it was committed) is
//     retried row by row, each call with its own context, in queue order. So
//     of concurrent duplicates, the first queued wins and the others get
//     pay.ErrDuplicateOrder, as with single statements.
//   - Any other error (connection lost, database closed, context ended) fails
//     every call of the batch with that error.
//   - A call whose context ends while it is queued leaves the queue and its
//     row is never written. One whose context ends while its batch is in
//     flight returns the context's error at once, as database/sql does; like
//     a single statement cut off mid-flight, its row may or may not have been
//     committed. The batch itself is cancelled only when every one of its
//     callers has gone.
//
// Statement texts are bucketed so that few prepared statements exist per
// connection: an INSERT batch takes the largest of createSizes that fits,
// leaving the rest queued; UPDATE and SELECT batches are padded to the next
// power of two by repeating their last request_id, which changes nothing.

// OrdersOptions tunes the order store.
type OrdersOptions struct {
	// GroupCommit coalesces concurrent Create calls into one multi-row
	// INSERT and concurrent Finish calls into one UPDATE in one transaction.
	GroupCommit bool
	// BatchGets coalesces concurrent Get calls into one SELECT … IN (…).
	BatchGets bool
	// MaxBatch bounds the calls sent in one statement; 0 or more than 64
	// means 64.
	MaxBatch int
}

// DefaultOrdersOptions is what NewOrders uses: group commit and batched
// reads on. docs/PERFORMANCE.md ("End-to-end") has the measurements.
func DefaultOrdersOptions() OrdersOptions {
	return OrdersOptions{GroupCommit: true, BatchGets: true, MaxBatch: maxBatch}
}

// maxBatch is the largest batch and the default OrdersOptions.MaxBatch.
const maxBatch = 64

// createSizes are the row counts a batched INSERT is prepared for.
var createSizes = []int{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}

// createFit is how many of n queued creates one INSERT takes.
func createFit(n int) int {
	fit := 1
	for _, k := range createSizes {
		if k <= n {
			fit = k
		}
	}
	return fit
}

// padded is the parameter count, a power of two, that n request ids are
// padded to.
func padded(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}

// GroupStats counts the work of one kind of call under group commit.
type GroupStats struct {
	Calls    int64 // calls that reached the database, alone or in a batch
	Batches  int64 // statements (or transactions) that served two or more calls
	Batched  int64 // calls served by those
	Retried  int64 // calls retried alone after their batch was refused
	Canceled int64 // calls that left the queue because their context ended
}

// OrdersStats is GroupStats for each kind of call.
type OrdersStats struct {
	Create, Finish, Get GroupStats
}

func groupStats(st batch.Stats) GroupStats {
	return GroupStats{Calls: st.Calls, Batches: st.Batches, Batched: st.Batched, Retried: st.Retried, Canceled: st.Canceled}
}

// Stats reports what group commit did so far (all zero when it is off).
func (s *Orders) Stats() OrdersStats {
	var out OrdersStats
	if g := s.group; g != nil {
		if g.creates != nil {
			out.Create = groupStats(g.creates.Stats())
		}
		if g.finishes != nil {
			out.Finish = groupStats(g.finishes.Stats())
		}
		if g.gets != nil {
			out.Get = groupStats(g.gets.Stats())
		}
	}
	return out
}

// orderGroups holds the batchers of one Orders.
type orderGroups struct {
	s        *Orders
	sqlDB    *sql.DB
	creates  *batch.Batcher[orderRow, struct{}]
	finishes *batch.Batcher[outcome, struct{}]
	gets     *batch.Batcher[string, *pay.Order]

	// finishTable is the batched UPDATE's table reference (finishTable).
	finishTable string

	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

func newOrderGroups(s *Orders, opts OrdersOptions) (*orderGroups, error) {
	sqlDB, err := s.db.DB()
	if err != nil {
		return nil, fmt.Errorf("repo: group commit: %w", err)
	}
	limit := opts.MaxBatch
	if limit <= 0 || limit > maxBatch {
		limit = maxBatch
	}
	g := &orderGroups{s: s, sqlDB: sqlDB, stmts: map[string]*sql.Stmt{}, finishTable: finishTable(s.db.Dialector.Name())}
	if opts.GroupCommit {
		g.creates = &batch.Batcher[orderRow, struct{}]{
			Max: limit, Fit: func(calls []*batch.Call[orderRow, struct{}]) int { return createFit(len(calls)) },
			One: func(ctx context.Context, r orderRow) (struct{}, error) {
				return struct{}{}, s.createOne(ctx, r)
			},
			Many: g.createMany,
		}
		g.finishes = &batch.Batcher[outcome, struct{}]{
			Max: limit,
			One: func(ctx context.Context, f outcome) (struct{}, error) {
				return struct{}{}, s.finishOne(ctx, f)
			},
			Many: g.finishMany,
		}
	}
	if opts.BatchGets {
		g.gets = &batch.Batcher[string, *pay.Order]{Max: limit, One: s.getOne, Many: g.getMany}
	}
	return g, nil
}

// stmt returns the prepared statement for query, preparing it on first use.
// database/sql prepares it again on each connection that runs it.
func (g *orderGroups) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	g.mu.Lock()
	st := g.stmts[query]
	g.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := g.sqlDB.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if old := g.stmts[query]; old != nil {
		_ = st.Close()
		return old, nil
	}
	g.stmts[query] = st
	return st, nil
}

// refused reports whether the database answered err to a statement: the
// statement was rejected as a whole (in autocommit, or before the commit of
// a transaction that is then rolled back), so nothing of it is committed and
// its calls can safely be retried one by one. Lost connections, closed
// pools and ended contexts are not refusals: a statement may have been
// committed without its answer arriving.
func (g *orderGroups) refused(err error) bool {
	var myErr *mysql.MySQLError
	return errors.As(err, &myErr) || errors.Is(g.s.translate(err), gorm.ErrDuplicatedKey)
}

var (
	insertSQLs sync.Map // row count -> INSERT text
	finishSQLs sync.Map // finishKey -> UPDATE text
	getSQLs    sync.Map // padded count -> SELECT text
)

func cachedSQL(m *sync.Map, n int, build func(int) string) string {
	if q, ok := m.Load(n); ok {
		return q.(string)
	}
	q, _ := m.LoadOrStore(n, build(n))
	return q.(string)
}

func insertSQL(n int) string {
	return cachedSQL(&insertSQLs, n, func(n int) string {
		return "INSERT INTO orders (" + orderColumns + ") VALUES " + strings.TrimSuffix(strings.Repeat(orderRowValues+", ", n), ", ")
	})
}

// finishColumns are the columns Finish sets, in the order of outcome.value.
var finishColumns = []string{"status", "channel_trade_no", "failure_code", "failure_message", "updated_at"}

// value is the value of finishColumns[col].
func (f *outcome) value(col int) any {
	switch col {
	case 0:
		return f.Status
	case 1:
		return f.ChannelTradeNo
	case 2:
		return f.FailureCode
	case 3:
		return f.FailureMessage
	default:
		return f.UpdatedAt
	}
}

// finishSQL is the batched Finish for n (padded) outcomes. Each column is set
// by a CASE on order_no, unique, so each row takes its own claimant's
// outcome; the WHERE names the rows by request_id (the index the lookups
// use) and order_no (only the request that claimed an order finishes it).
// ELSE keeps the column as it is, so a row the
// CASE does not match (which the IN list prevents) is left untouched rather
// than written with NULL. Assignments do not read status, so MySQL's
// left-to-right evaluation of SET does not matter.
//
// table names the table with an index hint for request_id (finishTable):
// left to itself, MariaDB reads the WHERE through (status, updated_at) when
// few orders are PROCESSING, which is the usual case. That range scan takes
// next-key locks on every PROCESSING row and the gaps between them, held
// until the COMMIT's fsync, so every concurrent claim INSERT (a new
// PROCESSING entry in that index) and every other outcome batch waited for
// it (docs/PERFORMANCE.md, "The outcome UPDATE's plan").
func finishSQL(table string, n int) string {
	key := finishKey{table, n}
	if q, ok := finishSQLs.Load(key); ok {
		return q.(string)
	}
	q, _ := finishSQLs.LoadOrStore(key, buildFinishSQL(table, n))
	return q.(string)
}

// finishKey is a finishSQL text's cache key.
type finishKey struct {
	table string
	n     int
}

// finishTable is the table reference of the batched UPDATE for dialect:
// orders through its unique request_id index.
func finishTable(dialect string) string {
	switch dialect {
	case "mysql":
		return "orders FORCE INDEX (uk_orders_request_id)"
	case "sqlite":
		return "orders INDEXED BY uk_orders_request_id"
	}
	return "orders"
}

func buildFinishSQL(table string, n int) string {
	var b strings.Builder
	b.WriteString("UPDATE " + table + " SET ")
	for i, col := range finishColumns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(col + " = CASE order_no")
		b.WriteString(strings.Repeat(" WHEN ? THEN ?", n))
		b.WriteString(" ELSE " + col + " END")
	}
	b.WriteString(" WHERE request_id IN (" + placeholders(n) + ") AND order_no IN (" + placeholders(n) + ") AND status IN (?, ?)")
	return b.String()
}

func getSQL(n int) string {
	return cachedSQL(&getSQLs, n, func(n int) string {
		return "SELECT " + orderColumns + " FROM orders WHERE request_id IN (" + placeholders(n) + ")"
	})
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// createMany inserts the rows of two or more Create calls in one statement.
func (g *orderGroups) createMany(ctx context.Context, calls []*batch.Call[orderRow, struct{}]) {
	query := insertSQL(len(calls))
	args := make([]any, 0, 16*len(calls))
	for _, c := range calls {
		args = append(args, c.Arg.values()...)
	}
	begin := time.Now()
	st, err := g.stmt(ctx, query)
	if err == nil {
		_, err = st.ExecContext(ctx, args...)
	}
	g.s.trace(ctx, begin, query, err)
	switch {
	case err == nil:
	case g.refused(err):
		g.creates.AddRetried(len(calls))
		for _, c := range calls {
			c.Err = g.s.createOne(c.Ctx, c.Arg)
		}
	default:
		for _, c := range calls {
			c.Err = createFailed(err)
		}
	}
}

// finishMany records the outcomes of two or more Finish calls in one
// transaction, or, when that does not change exactly one row per call, one
// by one.
func (g *orderGroups) finishMany(ctx context.Context, calls []*batch.Call[outcome, struct{}]) {
	n := len(calls)
	p := padded(n)
	query := finishSQL(g.finishTable, p)
	args := make([]any, 0, 12*p+2)
	for col := range finishColumns {
		for i := 0; i < n; i++ {
			f := &calls[i].Arg
			args = append(args, f.OrderNo, f.value(col))
		}
		// Padding: the last WHEN again, which never matches first.
		last := args[len(args)-2:]
		for i := n; i < p; i++ {
			args = append(args, last...)
		}
	}
	for i := 0; i < p; i++ {
		args = append(args, calls[min(i, n-1)].Arg.RequestID) // request_id IN (…), padded
	}
	for i := 0; i < p; i++ {
		args = append(args, calls[min(i, n-1)].Arg.OrderNo) // order_no IN (…), padded
	}
	args = append(args, string(pay.StatusProcessing), string(pay.StatusUnknown))

	begin := time.Now()
	committed, retry, err := g.finishTx(ctx, query, args, int64(n))
	g.s.trace(ctx, begin, query, err)
	switch {
	case committed:
	case retry:
		// Not every call changed a row, or the database refused the UPDATE;
		// the transaction was rolled back. Each call gets its own answer.
		g.finishes.AddRetried(n)
		for _, c := range calls {
			c.Err = g.s.finishOne(c.Ctx, c.Arg)
		}
	default:
		for _, c := range calls {
			c.Err = fmt.Errorf("repo: finish order: %w", err)
		}
	}
}

// finishTx runs the batched UPDATE in a transaction and commits it only if
// it changed want rows (committed). retry reports a clean rollback: the
// UPDATE changed fewer rows, or the database refused it (see refused), and
// the rollback succeeded, so nothing of it is committed. Otherwise err says
// what failed; after a failed commit or rollback the UPDATE may or may not
// be committed.
func (g *orderGroups) finishTx(ctx context.Context, query string, args []any, want int64) (committed, retry bool, err error) {
	st, err := g.stmt(ctx, query)
	if err != nil {
		return false, g.refused(err), err
	}
	tx, err := g.sqlDB.BeginTx(ctx, nil)
	if err != nil {
		return false, g.refused(err), err
	}
	res, err := tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	var got int64
	if err == nil {
		got, err = res.RowsAffected()
	}
	if err == nil && got == want {
		if err := tx.Commit(); err != nil {
			return false, false, fmt.Errorf("commit: %w", err)
		}
		return true, false, nil
	}
	if rerr := tx.Rollback(); rerr != nil {
		if err == nil {
			err = fmt.Errorf("rollback: %w", rerr)
		}
		return false, false, err
	}
	return false, err == nil || g.refused(err), err
}

// getMany reads the orders of two or more Get calls in one SELECT.
func (g *orderGroups) getMany(ctx context.Context, calls []*batch.Call[string, *pay.Order]) {
	n := len(calls)
	p := padded(n)
	query := getSQL(p)
	args := make([]any, p)
	for i := range args {
		if i < n {
			args[i] = calls[i].Arg
		} else {
			args[i] = args[n-1]
		}
	}
	begin := time.Now()
	found, err := g.queryOrders(ctx, query, args)
	g.s.trace(ctx, begin, query, err)
	for _, c := range calls {
		switch r, ok := found[c.Arg]; {
		case err != nil:
			c.Err = fmt.Errorf("repo: get order: %w", err)
		case !ok:
			c.Err = pay.ErrOrderNotFound
		default:
			c.Res = r.order()
		}
	}
}

func (g *orderGroups) queryOrders(ctx context.Context, query string, args []any) (map[string]orderRow, error) {
	st, err := g.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := map[string]orderRow{}
	for rows.Next() {
		var r orderRow
		if err := r.scan(rows); err != nil {
			return nil, err
		}
		found[r.RequestID] = r
	}
	return found, rows.Err()
}
