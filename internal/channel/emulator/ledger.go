package emulator

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "github.com/glebarez/go-sqlite" // the pure-Go SQLite driver "sqlite", as internal/repo uses

	"payserver/internal/channel/gateway"
)

// Op is the kind of gateway call a ledger line records.
type Op string

// The ops.
const (
	OpPay   Op = "pay"
	OpQuery Op = "query"
	OpClose Op = "close"
)

// Ledger outcomes beyond the gateway's answers.
const (
	// OutcomeError: the call was answered with an error (401, 400, 503,
	// 500) and not processed.
	OutcomeError gateway.Outcome = "ERROR"
	// OutcomeNone: the call was never answered and never decided
	// (refused, dropped).
	OutcomeNone gateway.Outcome = "NONE"
)

// Fault names the injected fault that shaped a call, on its ledger line.
type Fault string

// The faults, named as the Behaviour rates that cause them.
const (
	FaultRefuse     Fault = "refuse"     // connection reset on arrival; not processed
	FaultDrop       Fault = "drop"       // held, then closed; not processed
	FaultError      Fault = "error"      // answered 503; not processed
	FaultLostAnswer Fault = "lostAnswer" // decided (outcome), answer never sent
)

// Line is one ledger entry: one gateway call the emulator received, as
// GET /ledger shows it.
type Line struct {
	// Seq numbers the lines in the order they were written (a call is
	// written when it is decided, after any pause and latency).
	Seq     int64  `json:"seq"`
	Op      Op     `json:"op"`
	Channel string `json:"channel"`
	OrderNo string `json:"orderNo"`
	// RequestID, Amount and Currency come from the call, or from the
	// order's records for a query or close that does not carry them;
	// empty or 0 when unknown.
	RequestID string `json:"requestId"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	// ReceivedAtUs is when the call arrived, in Unix microseconds.
	ReceivedAtUs int64 `json:"receivedAtUs"`
	// Outcome is what the emulator answered, or decided to answer when
	// the answer was lost; OutcomeError or OutcomeNone otherwise.
	Outcome gateway.Outcome `json:"outcome"`
	// MoneyMoved is true only on the one pay line that charged money
	// (also when it answered PROCESSING, or its answer was lost).
	MoneyMoved bool `json:"moneyMoved"`
	// TradeNo is the order's trade number when it has one.
	TradeNo string `json:"tradeNo,omitempty"`
	// Code is the answer's decline code or the error's code.
	Code  string `json:"code,omitempty"`
	Fault Fault  `json:"fault,omitempty"`
}

// schema is the ledger file's tables: the lines, and the orders (the
// idempotency memory), both written in one transaction per line.
const schema = `
CREATE TABLE IF NOT EXISTS ledger (
	seq            INTEGER PRIMARY KEY AUTOINCREMENT,
	op             TEXT    NOT NULL,
	channel        TEXT    NOT NULL,
	order_no       TEXT    NOT NULL,
	request_id     TEXT    NOT NULL,
	amount         INTEGER NOT NULL,
	currency       TEXT    NOT NULL,
	received_at_us INTEGER NOT NULL,
	outcome        TEXT    NOT NULL,
	money_moved    INTEGER NOT NULL,
	trade_no       TEXT    NOT NULL,
	code           TEXT    NOT NULL,
	fault          TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_received ON ledger (received_at_us, seq);
CREATE INDEX IF NOT EXISTS ledger_order ON ledger (channel, order_no, op);
CREATE TABLE IF NOT EXISTS orders (
	channel      TEXT    NOT NULL,
	order_no     TEXT    NOT NULL,
	request_id   TEXT    NOT NULL,
	amount       INTEGER NOT NULL,
	currency     TEXT    NOT NULL,
	outcome      TEXT    NOT NULL,
	trade_no     TEXT    NOT NULL,
	code         TEXT    NOT NULL,
	reason       TEXT    NOT NULL,
	reveal_at_us INTEGER NOT NULL,
	closed       INTEGER NOT NULL,
	PRIMARY KEY (channel, order_no)
);`

// ledgerPage is how many lines one read of GET /ledger takes from the
// file: the one connection is never held while a client reads.
const ledgerPage = 500

type orderKey struct{ channel, orderNo string }

// Store is the emulator's durable books, one SQLite file: every call
// received (Line) and every order remembered (Order). Each Append is one
// transaction, committed with synchronous=FULL before it returns, so a
// killed emulator keeps every line it wrote and reopening the file
// continues it. Orders are also held in memory, loaded at open.
type Store struct {
	db *sql.DB

	mu     sync.Mutex
	orders map[orderKey]Order
}

// OpenStore opens (or creates) the ledger file at path and loads its
// orders.
func OpenStore(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("emulator: empty ledger path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("emulator: ledger dir: %w", err)
	}
	// WAL with synchronous=FULL: one fsync of the log per commit.
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, fmt.Errorf("emulator: open ledger: %w", err)
	}
	db.SetMaxOpenConns(1) // one writer; reads are paged so they never hold it long
	db.SetMaxIdleConns(1)
	s := &Store{db: db, orders: map[orderKey]Order{}}
	if err := s.init(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) init(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("emulator: ledger schema: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT channel, order_no, request_id, amount, currency, outcome, trade_no, code, reason, reveal_at_us, closed FROM orders`)
	if err != nil {
		return fmt.Errorf("emulator: load orders: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var o Order
		var revealUs int64
		if err := rows.Scan(&o.Channel, &o.OrderNo, &o.RequestID, &o.Amount, &o.Currency, &o.Outcome, &o.TradeNo, &o.Code, &o.Reason, &revealUs, &o.Closed); err != nil {
			return fmt.Errorf("emulator: load orders: %w", err)
		}
		if revealUs != 0 {
			o.RevealAt = time.UnixMicro(revealUs)
		}
		s.orders[orderKey{o.Channel, o.OrderNo}] = o
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("emulator: load orders: %w", err)
	}
	return nil
}

// Order returns the order remembered on channel, if any.
func (s *Store) Order(channel, orderNo string) (Order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[orderKey{channel, orderNo}]
	return o, ok
}

// FirstPay returns when the first pay of orderNo on channel was received,
// whatever became of it; false when none was.
func (s *Store) FirstPay(ctx context.Context, channel, orderNo string) (time.Time, bool, error) {
	var us sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT MIN(received_at_us) FROM ledger WHERE channel = ? AND order_no = ? AND op = ?`,
		channel, orderNo, OpPay).Scan(&us)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("emulator: read ledger: %w", err)
	}
	if !us.Valid {
		return time.Time{}, false, nil
	}
	return time.UnixMicro(us.Int64), true, nil
}

// Orders returns every remembered order, in no particular order.
func (s *Store) Orders() []Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := make([]Order, 0, len(s.orders))
	for _, o := range s.orders {
		all = append(all, o)
	}
	return all
}

// Append writes l (its Seq is assigned) and, when o is not nil, the order
// o, in one transaction; it returns l with its Seq once both are on disk.
// On error nothing was written and the orders in memory are unchanged.
func (s *Store) Append(ctx context.Context, l Line, o *Order) (Line, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return l, fmt.Errorf("emulator: ledger: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	res, err := tx.ExecContext(ctx, `INSERT INTO ledger (op, channel, order_no, request_id, amount, currency, received_at_us, outcome, money_moved, trade_no, code, fault) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		l.Op, l.Channel, l.OrderNo, l.RequestID, l.Amount, l.Currency, l.ReceivedAtUs, l.Outcome, l.MoneyMoved, l.TradeNo, l.Code, l.Fault)
	if err != nil {
		return l, fmt.Errorf("emulator: ledger line: %w", err)
	}
	if l.Seq, err = res.LastInsertId(); err != nil {
		return l, fmt.Errorf("emulator: ledger line: %w", err)
	}
	if o != nil {
		var revealUs int64
		if !o.RevealAt.IsZero() {
			revealUs = o.RevealAt.UnixMicro()
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO orders (channel, order_no, request_id, amount, currency, outcome, trade_no, code, reason, reveal_at_us, closed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (channel, order_no) DO UPDATE SET request_id = excluded.request_id, amount = excluded.amount, currency = excluded.currency,
			outcome = excluded.outcome, trade_no = excluded.trade_no, code = excluded.code, reason = excluded.reason, reveal_at_us = excluded.reveal_at_us, closed = excluded.closed`,
			o.Channel, o.OrderNo, o.RequestID, o.Amount, o.Currency, o.Outcome, o.TradeNo, o.Code, o.Reason, revealUs, o.Closed)
		if err != nil {
			return l, fmt.Errorf("emulator: ledger order: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return l, fmt.Errorf("emulator: ledger commit: %w", err)
	}
	if o != nil {
		s.mu.Lock()
		s.orders[orderKey{o.Channel, o.OrderNo}] = *o
		s.mu.Unlock()
	}
	return l, nil
}

// Lines calls fn with every line received at or after sinceUs (Unix
// microseconds), in receive order (then Seq), until fn returns an error.
func (s *Store) Lines(ctx context.Context, sinceUs int64, fn func(Line) error) error {
	afterUs, afterSeq := sinceUs, int64(-1)
	for {
		page, err := s.page(ctx, afterUs, afterSeq)
		if err != nil {
			return err
		}
		for _, l := range page {
			if err := fn(l); err != nil {
				return err
			}
		}
		if len(page) < ledgerPage {
			return nil
		}
		last := page[len(page)-1]
		afterUs, afterSeq = last.ReceivedAtUs, last.Seq
	}
}

// page reads up to ledgerPage lines after (afterUs, afterSeq) in receive
// order.
func (s *Store) page(ctx context.Context, afterUs, afterSeq int64) ([]Line, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, op, channel, order_no, request_id, amount, currency, received_at_us, outcome, money_moved, trade_no, code, fault
		FROM ledger WHERE received_at_us > ? OR (received_at_us = ? AND seq > ?) ORDER BY received_at_us, seq LIMIT ?`,
		afterUs, afterUs, afterSeq, ledgerPage)
	if err != nil {
		return nil, fmt.Errorf("emulator: read ledger: %w", err)
	}
	defer rows.Close()
	var page []Line
	for rows.Next() {
		var l Line
		if err := rows.Scan(&l.Seq, &l.Op, &l.Channel, &l.OrderNo, &l.RequestID, &l.Amount, &l.Currency, &l.ReceivedAtUs, &l.Outcome, &l.MoneyMoved, &l.TradeNo, &l.Code, &l.Fault); err != nil {
			return nil, fmt.Errorf("emulator: read ledger: %w", err)
		}
		page = append(page, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("emulator: read ledger: %w", err)
	}
	return page, nil
}

// Close closes the file; every line Append returned is already on disk.
func (s *Store) Close() error { return s.db.Close() }
