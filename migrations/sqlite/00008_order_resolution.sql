-- See migrations/mysql/00008_order_resolution.sql: the limiter's admission
-- of an order and the resolution of an unknown outcome.
-- +goose Up
ALTER TABLE orders ADD COLUMN admitted_at_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN admitted_keys TEXT NOT NULL DEFAULT '';
ALTER TABLE orders ADD COLUMN limits_version TEXT NOT NULL DEFAULT '';
ALTER TABLE orders ADD COLUMN resolved_by TEXT NOT NULL DEFAULT '';
ALTER TABLE orders ADD COLUMN resolved_at_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN resolve_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE orders ADD COLUMN resolve_lease_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN resolve_next_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN resolve_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN resolve_close INTEGER NOT NULL DEFAULT 0;
CREATE INDEX idx_orders_status_resolve_next ON orders (status, resolve_next_us);
CREATE INDEX idx_orders_channel_admitted ON orders (channel, admitted_at_us);

-- +goose Down
DROP INDEX idx_orders_channel_admitted;
DROP INDEX idx_orders_status_resolve_next;
ALTER TABLE orders DROP COLUMN resolve_close;
ALTER TABLE orders DROP COLUMN resolve_attempts;
ALTER TABLE orders DROP COLUMN resolve_next_us;
ALTER TABLE orders DROP COLUMN resolve_lease_us;
ALTER TABLE orders DROP COLUMN resolve_owner;
ALTER TABLE orders DROP COLUMN resolved_at_us;
ALTER TABLE orders DROP COLUMN resolved_by;
ALTER TABLE orders DROP COLUMN limits_version;
ALTER TABLE orders DROP COLUMN admitted_keys;
ALTER TABLE orders DROP COLUMN admitted_at_us;
