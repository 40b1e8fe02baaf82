-- ctxpack's PostgreSQL store, schema version 4: a note's text is stored
-- lz4-compressed by ctxpack (its length first, then one lz4 block) instead
-- of as text that PostgreSQL compresses itself: pglz took most of the
-- server's time in a sync, lz4 on the syncing client's threads a fraction
-- of it, at about the same size. As in version 3, the rows derived from the
-- vault folders are forgotten, so the next sync of each vault reads every
-- note again; feedback and vectors stay.

DELETE FROM ctxpack_notes;
DELETE FROM ctxpack_terms;
DELETE FROM ctxpack_backlinks;
DELETE FROM ctxpack_files;
UPDATE ctxpack_vaults
SET notes = 0, sections = 0, text_tokens = 0, heading_tokens = 0, body_tokens = 0,
    generation = generation + 1;

ALTER TABLE ctxpack_notes ALTER COLUMN body TYPE bytea USING convert_to(body, 'UTF8');
ALTER TABLE ctxpack_notes ALTER COLUMN body SET STORAGE EXTERNAL;

INSERT INTO ctxpack_schema (version) VALUES (4);
