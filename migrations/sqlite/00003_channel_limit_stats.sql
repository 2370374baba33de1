-- +goose Up
-- See migrations/mysql/00003_channel_limit_stats.sql: one row per minute
-- (Unix seconds of its start) and bizType+channel, summed by additive upserts.
CREATE TABLE channel_limit_stats (
  minute              INTEGER NOT NULL,
  biz_type            TEXT    NOT NULL,
  channel             TEXT    NOT NULL,
  attempts            INTEGER NOT NULL DEFAULT 0,
  admitted            INTEGER NOT NULL DEFAULT 0,
  limited             INTEGER NOT NULL DEFAULT 0,
  shadow_limited      INTEGER NOT NULL DEFAULT 0,
  degraded            INTEGER NOT NULL DEFAULT 0,
  released            INTEGER NOT NULL DEFAULT 0,
  near_cache_refusals INTEGER NOT NULL DEFAULT 0,
  peak_utilization    REAL    NOT NULL DEFAULT 0,
  limit_rule          TEXT    NOT NULL DEFAULT '',
  updated_at          DATETIME NOT NULL,
  PRIMARY KEY (minute, biz_type, channel)
);
CREATE INDEX idx_channel_limit_stats_key_minute ON channel_limit_stats (biz_type, channel, minute);

-- +goose Down
DROP TABLE channel_limit_stats;
