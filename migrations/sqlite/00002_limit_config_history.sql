-- +goose Up
CREATE TABLE limit_config_history (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  changed_at   DATETIME NOT NULL,
  source       TEXT NOT NULL,
  name         TEXT NOT NULL,
  md5          TEXT NOT NULL,
  changed_keys TEXT NOT NULL,
  instance     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX idx_limit_config_history_changed_at ON limit_config_history (changed_at);

-- +goose Down
DROP TABLE limit_config_history;
