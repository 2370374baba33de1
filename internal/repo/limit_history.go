package repo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"payserver/internal/configcenter"
)

// historyRow is one applied or refused limits document in
// limit_config_history.
type historyRow struct {
	ID          uint64 `gorm:"primaryKey"`
	ChangedAt   time.Time
	Kind        string
	Source      string
	Name        string
	MD5         string `gorm:"column:md5"`
	ChangedKeys string // JSON array of "KEY: old -> new"
	Refusal     string
	Instance    string
}

func (historyRow) TableName() string { return "limit_config_history" }

// maxRefusal is the longest refusal reason stored (the column's width).
const maxRefusal = 2000

// LimitHistory implements configcenter.History on gorm. Every instance
// records the documents it applies and refuses, tagged with its instance
// name.
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
	kind := c.Kind
	if kind == "" {
		kind = configcenter.KindChange
	}
	row := historyRow{
		ChangedAt: c.At.UTC(), Kind: string(kind), Source: c.Source, Name: c.Name, MD5: c.MD5,
		ChangedKeys: string(js), Refusal: truncateUTF8(c.Refusal, maxRefusal), Instance: h.instance,
	}
	if err := h.db.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("repo: record limits document: %w", err)
	}
	return nil
}

// List returns the entries recorded in [from, to), oldest first, at most
// limit of them.
func (h *LimitHistory) List(ctx context.Context, from, to time.Time, limit int) ([]configcenter.Change, error) {
	var rows []historyRow
	err := h.db.WithContext(ctx).Where("changed_at >= ? AND changed_at < ?", from.UTC(), to.UTC()).
		Order("changed_at, id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("repo: list limits history: %w", err)
	}
	return changes(rows), nil
}

// Page returns up to limit entries whose id is below before (any id when
// before is 0), newest first: one page of GET /limits/history. The next
// page is asked with before set to the last entry's ID.
func (h *LimitHistory) Page(ctx context.Context, before uint64, limit int) ([]configcenter.Change, error) {
	q := h.db.WithContext(ctx).Order("id DESC").Limit(limit)
	if before > 0 {
		q = q.Where("id < ?", before)
	}
	var rows []historyRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("repo: page limits history: %w", err)
	}
	return changes(rows), nil
}

// unreadableKeys starts the one key of a change whose recorded keys
// (changed_keys) are not the JSON array written here.
const unreadableKeys = "(the keys recorded for this change cannot be read: "

func changes(rows []historyRow) []configcenter.Change {
	out := make([]configcenter.Change, 0, len(rows))
	for _, r := range rows {
		keys := []string{}
		if r.ChangedKeys != "" {
			if err := json.Unmarshal([]byte(r.ChangedKeys), &keys); err != nil {
				// The audit says the row's keys are unreadable rather than
				// that the change touched none.
				keys = []string{unreadableKeys + err.Error() + ")"}
			}
		}
		out = append(out, configcenter.Change{
			ID: r.ID, At: r.ChangedAt.UTC(), Kind: configcenter.ChangeKind(r.Kind), Source: r.Source, Name: r.Name,
			MD5: r.MD5, Keys: keys, Refusal: r.Refusal, Instance: r.Instance,
		})
	}
	return out
}

// truncateUTF8 cuts s to at most n runes.
func truncateUTF8(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
