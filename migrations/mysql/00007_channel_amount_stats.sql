-- +goose Up
-- One row per minute, channel and currency: the requests with an amount
-- that the limiter admitted and refused, and the sums of their amounts in
-- minor units. Every instance adds its counts with an additive upsert, as
-- for channel_limit_stats. `other` (lower case) collects channels the
-- limits document does not name and currencies that are not three
-- upper-case letters.
CREATE TABLE channel_amount_stats (
  minute          BIGINT      NOT NULL,
  channel         VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  currency        VARCHAR(8)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  admitted        BIGINT      NOT NULL DEFAULT 0,
  admitted_amount BIGINT      NOT NULL DEFAULT 0,
  refused         BIGINT      NOT NULL DEFAULT 0,
  refused_amount  BIGINT      NOT NULL DEFAULT 0,
  updated_at      DATETIME(6) NOT NULL,
  PRIMARY KEY (minute, channel, currency),
  KEY idx_channel_amount_stats_channel_minute (channel, minute)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE channel_amount_stats;
