-- +goose Up
-- Merchant IDs are compared byte for byte: MariaDB's utf8mb4_bin pads
-- with spaces when it compares, so "M1" and "M1 " (both valid merchant
-- IDs) were one row of the primary key and their counts were summed
-- together. VARBINARY compares bytes, without padding (256 bytes: 64
-- characters of up to 4 bytes each).
ALTER TABLE channel_merchant_stats MODIFY merchant VARBINARY(256) NOT NULL;

-- +goose Down
-- The column stays VARBINARY: every binary reads and writes it unchanged,
-- and turning it back would make rows of merchants that differ only in
-- trailing spaces collide in the primary key, failing the rollback.
SELECT 1;
