-- The decision log: every limiter decision and every release or give-back,
-- for `payserver what-if` to replay a proposed limits document over the
-- traffic payserver saw. Analytics, not money: written in batches off the
-- request path and pruned after PAYSERVER_DECISION_LOG_RETENTION.
--   at_us      the instant (µs): Redis TIME for a Redis decision, the
--              limiter's clock otherwise and for releases
--   kind       decision, release, giveback, throttle (the store learned from
--              a channel's throttle) or reset (of a key's learned limits)
--   biz_type, channel, member, merchant, amount, currency: the request; a
--              throttle's amount is the channel's retry-after in µs
--   outcome    admitted, duplicate, refused, conflict, unavailable; '' for
--              a release
--   source     what decided: redis, near_cache, local, fail_open, closed,
--              unlimited; '' for a release
--   version    the limits version the decision (or throttle, reset) was
--              taken under
-- limit_documents keeps each limits document applied, by version, so that a
-- replay can take every decision again under the document it was taken
-- under.
-- +goose Up
CREATE TABLE decision_log (
  id        BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  at_us     BIGINT       NOT NULL,
  kind      VARCHAR(8)   CHARACTER SET ascii NOT NULL,
  biz_type  VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  channel   VARCHAR(32)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  member    VARCHAR(128) NOT NULL,
  merchant  VARCHAR(64)  NOT NULL DEFAULT '',
  amount    BIGINT       NOT NULL DEFAULT 0,
  currency  VARCHAR(3)   CHARACTER SET ascii NOT NULL DEFAULT '',
  outcome   VARCHAR(12)  CHARACTER SET ascii NOT NULL DEFAULT '',
  source    VARCHAR(12)  CHARACTER SET ascii NOT NULL DEFAULT '',
  version   VARCHAR(64)  CHARACTER SET ascii NOT NULL DEFAULT '',
  PRIMARY KEY (id),
  KEY idx_decision_log_at (at_us)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE limit_documents (
  version    VARCHAR(64) CHARACTER SET ascii NOT NULL,
  applied_at DATETIME(6) NOT NULL,
  content    MEDIUMTEXT  NOT NULL,
  PRIMARY KEY (version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE limit_documents;
DROP TABLE decision_log;
