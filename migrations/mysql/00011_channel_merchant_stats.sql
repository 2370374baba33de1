-- +goose Up
-- One row per minute, bizType+channel (as counted in channel_limit_stats)
-- and merchant: the requests the limiter admitted and refused for that
-- merchant. Every instance adds its counts with an additive upsert. Each
-- instance writes, per key and minute, its 20 merchants with the most
-- attempts and sums the rest under `other`; `-` is a request naming no
-- merchant. merchant is case-sensitive (utf8mb4_bin), as merchant IDs are.
CREATE TABLE channel_merchant_stats (
  minute     BIGINT      NOT NULL,
  biz_type   VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  channel    VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  merchant   VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  admitted   BIGINT      NOT NULL DEFAULT 0,
  refused    BIGINT      NOT NULL DEFAULT 0,
  updated_at DATETIME(6) NOT NULL,
  PRIMARY KEY (minute, biz_type, channel, merchant),
  KEY idx_channel_merchant_stats_key_minute (biz_type, channel, minute)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE channel_merchant_stats;
