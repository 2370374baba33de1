-- Every applied AND refused limits document is kept: kind tells a start's
-- load, a change, a no-op edit (unchanged) and a refusal apart; refusal
-- holds why a document was refused (cut to 2,000 characters). Rows written
-- before this migration were applied changes.
-- +goose Up
ALTER TABLE limit_config_history
  ADD COLUMN kind    VARCHAR(16)   CHARACTER SET ascii NOT NULL DEFAULT 'change',
  ADD COLUMN refusal VARCHAR(2000) NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE limit_config_history DROP COLUMN refusal, DROP COLUMN kind;
