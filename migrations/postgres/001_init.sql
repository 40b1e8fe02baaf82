-- ctxpack's PostgreSQL store, schema version 1. Every vault synced into the
-- database has a row in ctxpack_vaults; everything else hangs off its id.
-- A sync rewrites a vault's rows in one transaction and bumps its
-- generation, which servers check before each call.

CREATE TABLE ctxpack_schema (
    version integer NOT NULL
);

CREATE TABLE ctxpack_vaults (
    id serial PRIMARY KEY,
    name text NOT NULL UNIQUE,
    -- The vault folder the last sync read (shown, never opened by servers).
    root text NOT NULL,
    generation bigint NOT NULL DEFAULT 0,
    -- The privacy policy's fingerprint the notes were read under.
    policy text NOT NULL DEFAULT '',
    next_note_id integer NOT NULL DEFAULT 0,
    notes integer NOT NULL DEFAULT 0,
    sections bigint NOT NULL DEFAULT 0,
    -- Tokens in the note-level text and in the section fields: BM25's
    -- average field lengths.
    text_tokens bigint NOT NULL DEFAULT 0,
    heading_tokens bigint NOT NULL DEFAULT 0,
    body_tokens bigint NOT NULL DEFAULT 0,
    -- postcard: index.md descriptions, hot.md links, walk problems.
    roles bytea NOT NULL DEFAULT '',
    updated_at bigint NOT NULL DEFAULT 0
);

-- Every file the walker listed, notes or not, so a sync re-reads only what
-- changed.
CREATE TABLE ctxpack_files (
    vault integer NOT NULL REFERENCES ctxpack_vaults (id) ON DELETE CASCADE,
    path text NOT NULL,
    size bigint NOT NULL,
    mtime_ns bigint NOT NULL,
    hash bytea NOT NULL,
    is_note boolean NOT NULL,
    -- What was wrong with the file, one problem per line.
    problems text NOT NULL DEFAULT '',
    PRIMARY KEY (vault, path)
);

-- One row per note: its metadata, its text as the privacy policy lets it
-- be seen (the only text a server ever has), its terms and raw links.
CREATE TABLE ctxpack_notes (
    vault integer NOT NULL REFERENCES ctxpack_vaults (id) ON DELETE CASCADE,
    path text NOT NULL,
    id integer NOT NULL,
    meta bytea NOT NULL,
    body text NOT NULL,
    redactions bytea NOT NULL,
    norm smallint NOT NULL,
    terms bytea NOT NULL,
    links bytea NOT NULL,
    PRIMARY KEY (vault, path)
);
CREATE UNIQUE INDEX ctxpack_notes_id ON ctxpack_notes (vault, id);

-- One row per term: its posting list over notes and how many notes and
-- sections contain it.
CREATE TABLE ctxpack_terms (
    vault integer NOT NULL REFERENCES ctxpack_vaults (id) ON DELETE CASCADE,
    term text NOT NULL,
    postings bytea NOT NULL,
    note_df integer NOT NULL,
    heading_df integer NOT NULL,
    body_df integer NOT NULL,
    PRIMARY KEY (vault, term)
);

-- The notes linking to each note (at most 32, in path order), with the
-- byte range of the linking sentence in the source's body.
CREATE TABLE ctxpack_backlinks (
    vault integer NOT NULL REFERENCES ctxpack_vaults (id) ON DELETE CASCADE,
    target text NOT NULL,
    entries bytea NOT NULL,
    PRIMARY KEY (vault, target)
);

-- mark-useful votes: rows are only ever inserted, so serving needs no
-- UPDATE grant.
CREATE TABLE ctxpack_feedback (
    id bigserial PRIMARY KEY,
    vault integer NOT NULL REFERENCES ctxpack_vaults (id) ON DELETE CASCADE,
    path text NOT NULL,
    useful boolean NOT NULL
);
CREATE INDEX ctxpack_feedback_vault ON ctxpack_feedback (vault, path);

INSERT INTO ctxpack_schema (version) VALUES (1);
