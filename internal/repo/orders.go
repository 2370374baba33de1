package repo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

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
}

func (orderRow) TableName() string { return "orders" }

// Orders implements pay.OrderStore on gorm.
type Orders struct {
	db *gorm.DB
}

// NewOrders returns the order store on db.
func NewOrders(db *gorm.DB) (*Orders, error) {
	if db == nil {
		return nil, errors.New("repo: nil db")
	}
	return &Orders{db: db}, nil
}

var _ pay.OrderStore = (*Orders)(nil)

// Get, Create and Finish run on every payment. They send fixed SQL, the
// statements gorm would build, straight to gorm's prepared-statement pool:
// profiles of POST /pay showed gorm's per-call statement building,
// reflection and trace logging at about a sixth of payserver's CPU. Errors
// and slow statements still go to gorm's logger (see trace).
const (
	orderColumns = "order_no, request_id, request_hash, biz_type, channel, merchant_id, amount, currency, subject, " +
		"status, channel_trade_no, failure_code, failure_message, created_at, updated_at"
	getOrderSQL    = "SELECT " + orderColumns + " FROM orders WHERE request_id = ?"
	createOrderSQL = "INSERT INTO orders (" + orderColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	finishOrderSQL = "UPDATE orders SET status = ?, channel_trade_no = ?, failure_code = ?, failure_message = ?, updated_at = ? " +
		"WHERE request_id = ? AND status IN (?, ?)"
)

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

// Get implements pay.OrderStore.
func (s *Orders) Get(ctx context.Context, requestID string) (*pay.Order, error) {
	var r orderRow
	begin := time.Now()
	err := s.db.ConnPool.QueryRowContext(ctx, getOrderSQL, requestID).Scan(&r.OrderNo, &r.RequestID, &r.RequestHash,
		&r.BizType, &r.Channel, &r.MerchantID, &r.Amount, &r.Currency, &r.Subject,
		&r.Status, &r.ChannelTradeNo, &r.FailureCode, &r.FailureMessage, &r.CreatedAt, &r.UpdatedAt)
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

// Create implements pay.OrderStore.
func (s *Orders) Create(ctx context.Context, o *pay.Order) error {
	r := rowOf(o)
	begin := time.Now()
	_, err := s.db.ConnPool.ExecContext(ctx, createOrderSQL, r.OrderNo, r.RequestID, r.RequestHash,
		r.BizType, r.Channel, r.MerchantID, r.Amount, r.Currency, r.Subject,
		r.Status, r.ChannelTradeNo, r.FailureCode, r.FailureMessage, r.CreatedAt, r.UpdatedAt)
	s.trace(ctx, begin, createOrderSQL, err)
	if t, ok := s.db.Dialector.(gorm.ErrorTranslator); ok && err != nil {
		err = t.Translate(err)
	}
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return pay.ErrDuplicateOrder
	}
	if err != nil {
		return fmt.Errorf("repo: create order: %w", err)
	}
	return nil
}

// Finish implements pay.OrderStore.
func (s *Orders) Finish(ctx context.Context, o *pay.Order) error {
	begin := time.Now()
	res, err := s.db.ConnPool.ExecContext(ctx, finishOrderSQL, string(o.Status), o.ChannelTradeNo, o.FailureCode,
		o.FailureMessage, o.UpdatedAt.UTC(), o.RequestID, string(pay.StatusProcessing), string(pay.StatusUnknown))
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

// MarkStaleUnknown implements pay.OrderStore.
func (s *Orders) MarkStaleUnknown(ctx context.Context, cutoff time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Model(&orderRow{}).
		Where("status = ? AND updated_at < ?", string(pay.StatusProcessing), cutoff.UTC()).
		Updates(map[string]any{
			"status":          string(pay.StatusUnknown),
			"failure_code":    "OUTCOME_NOT_RECORDED",
			"failure_message": "the channel outcome was not recorded in time; reconcile with the channel",
			"updated_at":      time.Now().UTC(),
		})
	if res.Error != nil {
		return 0, fmt.Errorf("repo: mark stale orders: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// Ping implements pay.OrderStore.
func (s *Orders) Ping(ctx context.Context) error { return Ping(ctx, s.db) }

func rowOf(o *pay.Order) orderRow {
	return orderRow{
		OrderNo: o.OrderNo, RequestID: o.RequestID, RequestHash: o.RequestHash,
		BizType: o.BizType, Channel: o.Channel, MerchantID: o.MerchantID,
		Amount: o.Amount, Currency: o.Currency, Subject: o.Subject,
		Status: string(o.Status), ChannelTradeNo: o.ChannelTradeNo,
		FailureCode: o.FailureCode, FailureMessage: o.FailureMessage,
		CreatedAt: o.CreatedAt.UTC(), UpdatedAt: o.UpdatedAt.UTC(),
	}
}

func (r orderRow) order() *pay.Order {
	return &pay.Order{
		OrderNo: r.OrderNo, RequestID: r.RequestID, RequestHash: r.RequestHash,
		BizType: r.BizType, Channel: r.Channel, MerchantID: r.MerchantID,
		Amount: r.Amount, Currency: r.Currency, Subject: r.Subject,
		Status: pay.Status(r.Status), ChannelTradeNo: r.ChannelTradeNo,
		FailureCode: r.FailureCode, FailureMessage: r.FailureMessage,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}
