-- ctxpack's PostgreSQL store, schema version 5: the rows a sync derives
-- from a vault's folder (files, notes, terms, backlinks) no longer carry a
-- foreign key to their vault. Only a sync writes them, holding its vault's
-- row locked for update the whole time, so the per-row check proved
-- nothing and cost about two thirds of writing the term rows of a first
-- sync. Feedback and Bases rows keep theirs. Nothing is forgotten: the
-- rows stay as they are.

ALTER TABLE ctxpack_files DROP CONSTRAINT IF EXISTS ctxpack_files_vault_fkey;
ALTER TABLE ctxpack_notes DROP CONSTRAINT IF EXISTS ctxpack_notes_vault_fkey;
ALTER TABLE ctxpack_terms DROP CONSTRAINT IF EXISTS ctxpack_terms_vault_fkey;
ALTER TABLE ctxpack_backlinks DROP CONSTRAINT IF EXISTS ctxpack_backlinks_vault_fkey;

INSERT INTO ctxpack_schema (version) VALUES (5);
