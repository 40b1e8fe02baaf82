-- ctxpack's PostgreSQL store, schema version 8: what a filter reads, in
-- columns SQL can test, so a server turns `--where`, `--since`/`--until`,
-- folders and tags into predicates and ranks only the notes they keep.
--
-- Beside each note's property row: its date (the one `--since` reads,
-- seconds since the epoch) and its tags, case-folded (bytea: compared
-- byte by byte, as the embedded index compares them). One row per
-- property value, typed once by the sync exactly as a filter types it
-- (a number, else a date, else text), the folded text kept for text
-- comparisons (bytea again, for byte order and any character).
--
-- Notes synced before this version have no values: clearing each vault's
-- policy fingerprint makes the next sync read every file again.

ALTER TABLE ctxpack_note_properties
    ADD COLUMN IF NOT EXISTS updated bigint,
    ADD COLUMN IF NOT EXISTS tags bytea[] NOT NULL DEFAULT '{}';

CREATE TABLE IF NOT EXISTS ctxpack_note_values (
    vault integer NOT NULL,
    path text NOT NULL,
    -- The folded key and the value's place among the key's values.
    key text NOT NULL,
    ord integer NOT NULL,
    -- The value, folded.
    value bytea NOT NULL,
    -- Set when the value reads as a number.
    num double precision,
    -- Set when it reads as a date (and not as a number): the instant
    -- (seconds, nanoseconds) and its day (days from the common era).
    at_s bigint,
    at_ns integer,
    day integer,
    PRIMARY KEY (vault, path, key, ord)
);
CREATE INDEX IF NOT EXISTS ctxpack_note_values_key ON ctxpack_note_values (vault, key);

UPDATE ctxpack_vaults SET policy = '';

INSERT INTO ctxpack_schema (version) VALUES (8);
