package repo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"payserver/internal/configcenter"
)

// historyRow is one applied limits document in limit_config_history.
type historyRow struct {
	ID          uint64 `gorm:"primaryKey"`
	ChangedAt   time.Time
	Source      string
	Name        string
	MD5         string `gorm:"column:md5"`
	ChangedKeys string // JSON array of "KEY: old -> new"
	Instance    string
}

func (historyRow) TableName() string { return "limit_config_history" }

// LimitHistory implements configcenter.History on gorm. Every instance
// records the changes it applies, tagged with its instance name.
type LimitHistory struct {
	db       *gorm.DB
	instance string
}

// NewLimitHistory returns the history store on db for one instance.
func NewLimitHistory(db *gorm.DB, instance string) (*LimitHistory, error) {
	if db == nil {
		return nil, errors.New("repo: nil db")
	}
	return &LimitHistory{db: db, instance: instance}, nil
}

var _ configcenter.History = (*LimitHistory)(nil)

// Record implements configcenter.History.
func (h *LimitHistory) Record(ctx context.Context, c configcenter.Change) error {
	keys := c.Keys
	if keys == nil {
		keys = []string{}
	}
	js, err := json.Marshal(keys)
	if err != nil {
		return err
	}
	row := historyRow{ChangedAt: c.At.UTC(), Source: c.Source, Name: c.Name, MD5: c.MD5, ChangedKeys: string(js), Instance: h.instance}
	if err := h.db.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("repo: record limits change: %w", err)
	}
	return nil
}

// List returns the changes recorded in [from, to), oldest first, at most
// limit of them.
func (h *LimitHistory) List(ctx context.Context, from, to time.Time, limit int) ([]configcenter.Change, error) {
	var rows []historyRow
	err := h.db.WithContext(ctx).Where("changed_at >= ? AND changed_at < ?", from.UTC(), to.UTC()).
		Order("changed_at, id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("repo: list limits changes: %w", err)
	}
	out := make([]configcenter.Change, 0, len(rows))
	for _, r := range rows {
		var keys []string
		_ = json.Unmarshal([]byte(r.ChangedKeys), &keys)
		out = append(out, configcenter.Change{At: r.ChangedAt.UTC(), Source: r.Source, Name: r.Name, MD5: r.MD5, Keys: keys})
	}
	return out, nil
}
