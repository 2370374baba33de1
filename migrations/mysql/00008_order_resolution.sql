-- +goose Up
-- What the limiter admitted for an order, and how an unknown outcome was
-- resolved with its channel.
--   admitted_at_us   the limiter's own time (Redis TIME, µs) of the slot's
--                    admission; 0 when not recorded (orders stored before,
--                    or a payment that never reached the limiter)
--   admitted_keys    the window keys the slot was counted in, comma-separated
--   limits_version   the limits document in force for the admission
--   resolved_by      query, notify or close: who ended an UNKNOWN order; ''
--                    for an order its own request ended
--   resolved_at_us   when it was resolved (µs); 0 when not
--   resolve_owner, resolve_lease_us, resolve_next_us, resolve_attempts: the
--                    resolver's lease (one instance queries an order at a
--                    time), its next attempt and how many it made
--   resolve_close    1 when the channel answered NOT_FOUND and the close is
--                    still to be made: the next attempt closes at once
ALTER TABLE orders
  ADD COLUMN admitted_at_us   BIGINT        NOT NULL DEFAULT 0,
  ADD COLUMN admitted_keys    VARCHAR(1024) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
  ADD COLUMN limits_version   VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
  ADD COLUMN resolved_by      VARCHAR(8)    CHARACTER SET ascii NOT NULL DEFAULT '',
  ADD COLUMN resolved_at_us   BIGINT        NOT NULL DEFAULT 0,
  ADD COLUMN resolve_owner    VARCHAR(128)  CHARACTER SET ascii NOT NULL DEFAULT '',
  ADD COLUMN resolve_lease_us BIGINT        NOT NULL DEFAULT 0,
  ADD COLUMN resolve_next_us  BIGINT        NOT NULL DEFAULT 0,
  ADD COLUMN resolve_attempts INT           NOT NULL DEFAULT 0,
  ADD COLUMN resolve_close    TINYINT       NOT NULL DEFAULT 0,
  ADD KEY idx_orders_status_resolve_next (status, resolve_next_us),
  ADD KEY idx_orders_channel_admitted (channel, admitted_at_us);

-- +goose Down
ALTER TABLE orders
  DROP KEY idx_orders_channel_admitted,
  DROP KEY idx_orders_status_resolve_next,
  DROP COLUMN resolve_close,
  DROP COLUMN resolve_attempts,
  DROP COLUMN resolve_next_us,
  DROP COLUMN resolve_lease_us,
  DROP COLUMN resolve_owner,
  DROP COLUMN resolved_at_us,
  DROP COLUMN resolved_by,
  DROP COLUMN limits_version,
  DROP COLUMN admitted_keys,
  DROP COLUMN admitted_at_us;
