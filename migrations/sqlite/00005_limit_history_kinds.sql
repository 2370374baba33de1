-- Every applied AND refused limits document is kept: kind tells a start's
-- load, a change, a no-op edit (unchanged) and a refusal apart; refusal
-- holds why a document was refused. Rows written before this migration
-- were applied changes.
-- +goose Up
ALTER TABLE limit_config_history ADD COLUMN kind TEXT NOT NULL DEFAULT 'change';
ALTER TABLE limit_config_history ADD COLUMN refusal TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE limit_config_history DROP COLUMN refusal;
ALTER TABLE limit_config_history DROP COLUMN kind;
