package repo

import (
	"context"
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

// Get implements pay.OrderStore.
func (s *Orders) Get(ctx context.Context, requestID string) (*pay.Order, error) {
	var row orderRow
	err := s.db.WithContext(ctx).Where("request_id = ?", requestID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, pay.ErrOrderNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("repo: get order: %w", err)
	}
	return row.order(), nil
}

// Create implements pay.OrderStore.
func (s *Orders) Create(ctx context.Context, o *pay.Order) error {
	row := rowOf(o)
	err := s.db.WithContext(ctx).Create(&row).Error
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
	res := s.db.WithContext(ctx).Model(&orderRow{}).
		Where("request_id = ? AND status IN ?", o.RequestID, []string{string(pay.StatusProcessing), string(pay.StatusUnknown)}).
		Updates(map[string]any{
			"status":           string(o.Status),
			"channel_trade_no": o.ChannelTradeNo,
			"failure_code":     o.FailureCode,
			"failure_message":  o.FailureMessage,
			"updated_at":       o.UpdatedAt.UTC(),
		})
	if res.Error != nil {
		return fmt.Errorf("repo: finish order: %w", res.Error)
	}
	if res.RowsAffected == 0 {
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
