-- ctxpack's PostgreSQL store, schema version 7: every note's property
-- values for filters (`--where`), one row per note beside its row in
-- ctxpack_notes, written and deleted by the sync with it. The values are
-- the note's frontmatter as the privacy policy let it be seen (postcard:
-- folded keys, each with its values as shown), so a filter reads exactly
-- what the embedded index's property table holds.
--
-- Notes synced before this version have no row here: clearing each
-- vault's policy fingerprint makes the next sync read every file again
-- (a file's hash covers the policy), which writes them all.

CREATE TABLE IF NOT EXISTS ctxpack_note_properties (
    vault integer NOT NULL,
    path text NOT NULL,
    props bytea NOT NULL,
    PRIMARY KEY (vault, path)
);

UPDATE ctxpack_vaults SET policy = '';

INSERT INTO ctxpack_schema (version) VALUES (7);
