-- +goose Up
CREATE TABLE orders (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  order_no         VARCHAR(32)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  request_id       VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  request_hash     CHAR(64)     CHARACTER SET ascii NOT NULL,
  biz_type         VARCHAR(32)  CHARACTER SET ascii NOT NULL,
  channel          VARCHAR(32)  CHARACTER SET ascii NOT NULL,
  merchant_id      VARCHAR(64)  NOT NULL,
  amount           BIGINT       NOT NULL,
  currency         CHAR(3)      CHARACTER SET ascii NOT NULL,
  subject          VARCHAR(128) NOT NULL DEFAULT '',
  status           VARCHAR(16)  CHARACTER SET ascii NOT NULL,
  channel_trade_no VARCHAR(64)  NOT NULL DEFAULT '',
  failure_code     VARCHAR(32)  NOT NULL DEFAULT '',
  failure_message  VARCHAR(255) NOT NULL DEFAULT '',
  created_at       DATETIME(6)  NOT NULL,
  updated_at       DATETIME(6)  NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_orders_request_id (request_id),
  UNIQUE KEY uk_orders_order_no (order_no),
  KEY idx_orders_status_updated (status, updated_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE orders;
