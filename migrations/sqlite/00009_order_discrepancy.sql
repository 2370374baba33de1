-- See migrations/mysql/00009_order_discrepancy.sql: a channel's word that
-- contradicted a final order.
-- +goose Up
ALTER TABLE orders ADD COLUMN discrepancy_channel TEXT NOT NULL DEFAULT '';
ALTER TABLE orders ADD COLUMN discrepancy_reported TEXT NOT NULL DEFAULT '';
ALTER TABLE orders ADD COLUMN discrepancy_trade_no TEXT NOT NULL DEFAULT '';
ALTER TABLE orders ADD COLUMN discrepancy_at_us INTEGER NOT NULL DEFAULT 0;
CREATE INDEX idx_orders_discrepancy_at ON orders (discrepancy_at_us);

-- +goose Down
DROP INDEX idx_orders_discrepancy_at;
ALTER TABLE orders DROP COLUMN discrepancy_at_us;
ALTER TABLE orders DROP COLUMN discrepancy_trade_no;
ALTER TABLE orders DROP COLUMN discrepancy_reported;
ALTER TABLE orders DROP COLUMN discrepancy_channel;
