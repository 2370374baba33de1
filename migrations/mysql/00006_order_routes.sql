-- Routed payments (POST /pay without a channel, issue 15): routed_from is
-- the JSON list of candidates the payment was not sent to, each
-- {"channel","reason"} with reason limited, closed or unhealthy, in order
-- of preference; '[]' for a routed payment that went to its first
-- candidate, '' for a payment pinned to its channel by the client (and for
-- orders stored before routing).
-- route_stats counts, per minute and bizType, routed payments per channel
-- used (reason '') and fallbacks from a candidate to the channel used, or
-- to '' when every candidate refused (reason limited, closed, unhealthy);
-- every instance adds its counts with an additive upsert.
-- +goose Up
ALTER TABLE orders ADD COLUMN routed_from VARCHAR(1024) NOT NULL DEFAULT '';
CREATE TABLE route_stats (
  minute       BIGINT      NOT NULL,
  biz_type     VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  from_channel VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  to_channel   VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  reason       VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  count        BIGINT      NOT NULL DEFAULT 0,
  PRIMARY KEY (minute, biz_type, from_channel, to_channel, reason),
  KEY idx_route_stats_biz_minute (biz_type, minute)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE route_stats;
ALTER TABLE orders DROP COLUMN routed_from;
