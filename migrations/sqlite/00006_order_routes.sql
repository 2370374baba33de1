-- See migrations/mysql/00006_order_routes.sql: orders.routed_from holds a
-- routed payment's skipped candidates as JSON ('' when pinned), and
-- route_stats counts routed payments and fallbacks per minute and bizType.
-- +goose Up
ALTER TABLE orders ADD COLUMN routed_from TEXT NOT NULL DEFAULT '';
CREATE TABLE route_stats (
  minute       INTEGER NOT NULL,
  biz_type     TEXT    NOT NULL,
  from_channel TEXT    NOT NULL,
  to_channel   TEXT    NOT NULL,
  reason       TEXT    NOT NULL,
  count        INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (minute, biz_type, from_channel, to_channel, reason)
);
CREATE INDEX idx_route_stats_biz_minute ON route_stats (biz_type, minute);

-- +goose Down
DROP TABLE route_stats;
ALTER TABLE orders DROP COLUMN routed_from;
