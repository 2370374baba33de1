-- +goose Up
-- Merchant IDs are compared byte for byte: MariaDB's utf8mb4_bin pads
-- with spaces when it compares, so "M1" and "M1 " (both valid merchant
-- IDs) were one row of the primary key and their counts were summed
-- together. VARBINARY compares bytes, without padding (256 bytes: 64
-- characters of up to 4 bytes each).
ALTER TABLE channel_merchant_stats MODIFY merchant VARBINARY(256) NOT NULL;

-- +goose Down
ALTER TABLE channel_merchant_stats MODIFY merchant VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
