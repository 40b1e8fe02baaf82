-- ctxpack's PostgreSQL store, schema version 6: a writing project's files
-- (recipe, schemas, bindings, agents, outlines, chapters, cards), so that
-- `assemble --store` builds a pack without the project's folder. One row
-- per entry of the project's tree, as the syncing machine saw it: where a
-- symlink leads, which library folders its target lies in, and (for the
-- files the assembler may read) what reading it gives under the vault's
-- privacy policy. A server asks only for the rows of the libraries a work
-- binds: the others never leave the database. Nothing earlier is changed
-- or forgotten.

CREATE TABLE IF NOT EXISTS ctxpack_project_entries (
    vault integer NOT NULL REFERENCES ctxpack_vaults (id) ON DELETE CASCADE,
    -- Relative to the project root, through real folders only.
    path text NOT NULL,
    -- What the path (its target, for a symlink) is: d folder, f file,
    -- s special file, x broken symlink, o a symlink leading outside.
    kind "char" NOT NULL,
    -- For a symlink: its target, relative to the root.
    target text,
    -- Whether the vault's walk lists the path (a note the project reads).
    listed boolean NOT NULL,
    -- The library folders (names) the path itself lies in, and those its
    -- target lies in; the innermost such folder, relative to the root.
    inside text[] NOT NULL,
    reaches text[] NOT NULL,
    library text,
    -- What reading the file gives (opaque to the store), or NULL.
    content bytea,
    -- blake3 of the row: a sync rewrites only the rows that differ.
    hash bytea NOT NULL,
    PRIMARY KEY (vault, path)
);

INSERT INTO ctxpack_schema (version) VALUES (6);
