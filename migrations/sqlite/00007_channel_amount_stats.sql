-- +goose Up
-- See migrations/mysql/00007_channel_amount_stats.sql: one row per minute,
-- channel and currency, summed by additive upserts.
CREATE TABLE channel_amount_stats (
  minute          INTEGER NOT NULL,
  channel         TEXT    NOT NULL,
  currency        TEXT    NOT NULL,
  admitted        INTEGER NOT NULL DEFAULT 0,
  admitted_amount INTEGER NOT NULL DEFAULT 0,
  refused         INTEGER NOT NULL DEFAULT 0,
  refused_amount  INTEGER NOT NULL DEFAULT 0,
  updated_at      DATETIME NOT NULL,
  PRIMARY KEY (minute, channel, currency)
);
CREATE INDEX idx_channel_amount_stats_channel_minute ON channel_amount_stats (channel, minute);

-- +goose Down
DROP TABLE channel_amount_stats;
