-- +goose Up
-- See migrations/mysql/00011_channel_merchant_stats.sql: one row per
-- minute, key and merchant (at most 20 per instance, the rest as
-- `other`), summed by additive upserts.
CREATE TABLE channel_merchant_stats (
  minute     INTEGER NOT NULL,
  biz_type   TEXT    NOT NULL,
  channel    TEXT    NOT NULL,
  merchant   TEXT    NOT NULL,
  admitted   INTEGER NOT NULL DEFAULT 0,
  refused    INTEGER NOT NULL DEFAULT 0,
  updated_at DATETIME NOT NULL,
  PRIMARY KEY (minute, biz_type, channel, merchant)
);
CREATE INDEX idx_channel_merchant_stats_key_minute ON channel_merchant_stats (biz_type, channel, minute);

-- +goose Down
DROP TABLE channel_merchant_stats;
