-- +goose Up
-- One row per minute and bizType+channel: what the limiter decided. Every
-- instance adds its counts with an additive upsert, so rows sum over the
-- fleet. `minute` is the Unix time (UTC seconds) of the minute's start, so
-- that hour and day buckets are plain integer arithmetic in every dialect.
-- biz_type `other` (lower case, never a valid bizType) collects keys the
-- limits document does not name; the columns are case-sensitive (ascii_bin)
-- so that `other` and a bizType `OTHER` stay apart.
CREATE TABLE channel_limit_stats (
  minute              BIGINT       NOT NULL,
  biz_type            VARCHAR(32)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  channel             VARCHAR(32)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  attempts            BIGINT       NOT NULL DEFAULT 0,
  admitted            BIGINT       NOT NULL DEFAULT 0,
  limited             BIGINT       NOT NULL DEFAULT 0,
  shadow_limited      BIGINT       NOT NULL DEFAULT 0,
  degraded            BIGINT       NOT NULL DEFAULT 0,
  released            BIGINT       NOT NULL DEFAULT 0,
  near_cache_refusals BIGINT       NOT NULL DEFAULT 0,
  peak_utilization    DOUBLE       NOT NULL DEFAULT 0,
  limit_rule          VARCHAR(255) NOT NULL DEFAULT '',
  updated_at          DATETIME(6)  NOT NULL,
  PRIMARY KEY (minute, biz_type, channel),
  KEY idx_channel_limit_stats_key_minute (biz_type, channel, minute)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE channel_limit_stats;
