-- +goose Up
-- See migrations/mysql/00012_merchant_stats_bytes.sql. SQLite already
-- compares the merchant column byte for byte (its BINARY collation pads
-- nothing): the version is kept in step with MariaDB's, and nothing
-- changes.
SELECT 1;

-- +goose Down
SELECT 1;
