-- +goose Up
CREATE TABLE limit_config_history (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  changed_at   DATETIME(6)  NOT NULL,
  source       VARCHAR(16)  CHARACTER SET ascii NOT NULL,
  name         VARCHAR(255) NOT NULL,
  md5          VARCHAR(64)  CHARACTER SET ascii NOT NULL,
  changed_keys MEDIUMTEXT   NOT NULL,
  instance     VARCHAR(128) NOT NULL DEFAULT '',
  PRIMARY KEY (id),
  KEY idx_limit_config_history_changed_at (changed_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE limit_config_history;
