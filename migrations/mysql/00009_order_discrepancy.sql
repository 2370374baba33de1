-- +goose Up
-- A channel's word that contradicted an order once it was final (a
-- notification of SUCCEEDED for an order closed NOT_SENT, say): the
-- channel moved money payserver had given up, or answered otherwise than
-- it had. The first such word is kept; the order's state never changes.
--   discrepancy_channel   the channel that said it; '' when none
--   discrepancy_reported  what it reported: SUCCEEDED or DECLINED
--   discrepancy_trade_no  its trade number
--   discrepancy_at_us     when payserver heard it (µs); 0 when none
ALTER TABLE orders
  ADD COLUMN discrepancy_channel  VARCHAR(32)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
  ADD COLUMN discrepancy_reported VARCHAR(16)  CHARACTER SET ascii NOT NULL DEFAULT '',
  ADD COLUMN discrepancy_trade_no VARCHAR(64)  NOT NULL DEFAULT '',
  ADD COLUMN discrepancy_at_us    BIGINT       NOT NULL DEFAULT 0,
  ADD KEY idx_orders_discrepancy_at (discrepancy_at_us);

-- +goose Down
ALTER TABLE orders
  DROP KEY idx_orders_discrepancy_at,
  DROP COLUMN discrepancy_at_us,
  DROP COLUMN discrepancy_trade_no,
  DROP COLUMN discrepancy_reported,
  DROP COLUMN discrepancy_channel;
