-- +goose Up
CREATE TABLE orders (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  order_no         TEXT    NOT NULL,
  request_id       TEXT    NOT NULL,
  request_hash     TEXT    NOT NULL,
  biz_type         TEXT    NOT NULL,
  channel          TEXT    NOT NULL,
  merchant_id      TEXT    NOT NULL,
  amount           INTEGER NOT NULL,
  currency         TEXT    NOT NULL,
  subject          TEXT    NOT NULL DEFAULT '',
  status           TEXT    NOT NULL,
  channel_trade_no TEXT    NOT NULL DEFAULT '',
  failure_code     TEXT    NOT NULL DEFAULT '',
  failure_message  TEXT    NOT NULL DEFAULT '',
  created_at       DATETIME NOT NULL,
  updated_at       DATETIME NOT NULL
);
CREATE UNIQUE INDEX uk_orders_request_id ON orders (request_id);
CREATE UNIQUE INDEX uk_orders_order_no ON orders (order_no);
CREATE INDEX idx_orders_status_updated ON orders (status, updated_at);

-- +goose Down
DROP TABLE orders;
