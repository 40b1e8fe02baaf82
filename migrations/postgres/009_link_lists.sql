-- ctxpack's PostgreSQL store, schema version 9: a note's record (the
-- postcard `meta` of ctxpack_notes) ends with the share of its text on
-- lines of links, a ranking prior computed when the note is read, as the
-- embedded index's format 9 stores it.
--
-- Records written before this version do not decode: clearing each
-- vault's policy fingerprint makes the next sync read every file again
-- (a file's hash covers the policy), which rewrites them all.

UPDATE ctxpack_vaults SET policy = '';

INSERT INTO ctxpack_schema (version) VALUES (9);
