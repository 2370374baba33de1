-- See migrations/mysql/00010_decision_log.sql: the decision log and the
-- limits documents applied, for `payserver what-if`.
-- +goose Up
CREATE TABLE decision_log (
  id       INTEGER PRIMARY KEY AUTOINCREMENT,
  at_us    INTEGER NOT NULL,
  kind     TEXT    NOT NULL,
  biz_type TEXT    NOT NULL,
  channel  TEXT    NOT NULL,
  member   TEXT    NOT NULL,
  merchant TEXT    NOT NULL DEFAULT '',
  amount   INTEGER NOT NULL DEFAULT 0,
  currency TEXT    NOT NULL DEFAULT '',
  outcome  TEXT    NOT NULL DEFAULT '',
  source   TEXT    NOT NULL DEFAULT '',
  version  TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX idx_decision_log_at ON decision_log (at_us);

CREATE TABLE limit_documents (
  version    TEXT     NOT NULL PRIMARY KEY,
  applied_at DATETIME NOT NULL,
  content    TEXT     NOT NULL
);

-- +goose Down
DROP TABLE limit_documents;
DROP TABLE decision_log;
