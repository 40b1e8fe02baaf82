-- ctxpack's PostgreSQL store, schema version 2: the Bases files (`.base`)
-- of each vault, as a sync read them through the vault's privacy policy,
-- so that a server shows an embedded view without the vault folder.

CREATE TABLE ctxpack_bases (
    vault integer NOT NULL REFERENCES ctxpack_vaults (id) ON DELETE CASCADE,
    path text NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (vault, path)
);

-- Bases files synced before this version were listed but not kept: forget
-- them, so that the next sync reads them.
DELETE FROM ctxpack_files WHERE lower(path) LIKE '%.base';

INSERT INTO ctxpack_schema (version) VALUES (2);
