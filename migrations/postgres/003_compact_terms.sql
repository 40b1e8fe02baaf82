-- ctxpack's PostgreSQL store, schema version 3: a note's terms are stored
-- in a compact form (every distinct term once, the fields as indices into
-- that list) that earlier versions did not write. The rows derived from
-- the vault folders are forgotten, so the next sync of each vault reads
-- every note again; until then a server finds the vault empty. Feedback
-- stays, and so do vectors (they are keyed by the file's content hash).

DELETE FROM ctxpack_notes;
DELETE FROM ctxpack_terms;
DELETE FROM ctxpack_backlinks;
DELETE FROM ctxpack_files;
UPDATE ctxpack_vaults
SET notes = 0, sections = 0, text_tokens = 0, heading_tokens = 0, body_tokens = 0,
    generation = generation + 1;

-- Neither the terms nor their varint posting lists shrink much under
-- PostgreSQL's compression, which costs more time than it saves space.
ALTER TABLE ctxpack_notes ALTER COLUMN terms SET STORAGE EXTERNAL;
ALTER TABLE ctxpack_terms ALTER COLUMN postings SET STORAGE EXTERNAL;

INSERT INTO ctxpack_schema (version) VALUES (3);
