//! The PostgreSQL store: a vault's catalog, note texts, BM25 postings,
//! backlinks, vectors (pgvector) and feedback in a database that any number
//! of stateless servers read. `index --store` fills it ([`sync`]); every
//! other command opens a [`PgStore`]: one snapshot of one vault's catalog,
//! whose searches run as queries.
//!
//! ctxpack's own analyzer makes the terms and tantivy's BM25 function
//! scores them with the vault's exact statistics, so the store ranks as the
//! embedded index does; PostgreSQL only stores and fetches.

mod connection;
mod filters;
pub(crate) mod project;
mod properties;
pub(crate) mod sync;
pub(crate) mod terms;
pub(crate) mod vectors;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{Context, Result, anyhow};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

pub use connection::StoreUrl;
pub(crate) use connection::{Connection, StoreError};

use crate::analysis::{LinkEntry, order_hits, query_terms, resolve_links};
use crate::note::{Diagnostic, LinkGraph, NoteMeta};
use crate::note_tables::MetaTable;
use crate::privacy::Redaction;
use crate::store::Store;
use crate::store::feedback::{Counts, FeedbackStore};
use crate::vault::{LinkResolver, NoteSource, SharedTables, SourcedText, Vault};
use terms::{NoteTerms, bm25_weight, decode_postings};

/// The schema version this build reads and writes
/// (`migrations/postgres/NNN_*.sql`).
pub(crate) const SCHEMA_VERSION: i32 = 9;

/// The vault-level facts a sync records beside the notes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Roles {
    /// `index.md`'s description of each note, by path.
    pub descriptions: Vec<(String, String)>,
    /// The notes `hot.md` links to, in order.
    pub hot: Vec<String>,
    /// What the walker could not read.
    pub walk_problems: Vec<Diagnostic>,
}

/// One vault's catalog at one generation.
struct Snapshot {
    vault_id: i32,
    generation: i64,
    root: PathBuf,
    metas: Arc<MetaTable>,
    /// Each note's field-norm id, by note index.
    norms: Vec<u8>,
    /// Note id (as the postings name notes) → note index.
    by_id: FxHashMap<u32, usize>,
    sections: u64,
    text_tokens: u64,
    heading_tokens: u64,
    body_tokens: u64,
    descriptions: HashMap<usize, String>,
    hot: Vec<usize>,
    diagnostics: Vec<Diagnostic>,
    /// The Bases files the walk listed, sorted.
    bases: Vec<String>,
    /// The link resolver and match keys, built once for every call's vault.
    tables: SharedTables,
}

/// A vault in a PostgreSQL store, opened for queries.
pub struct PgStore {
    connection: Connection,
    name: String,
    snapshot: Arc<Snapshot>,
    /// Every resolved link, read from the notes' rows on first use.
    graph: OnceLock<Option<Arc<LinkGraph>>>,
    /// Every note's property values, read on first use (a `--where`).
    props: OnceLock<Option<Arc<crate::filter::PropertyTable>>>,
}

impl PgStore {
    /// The links every note's row holds, resolved against the snapshot's
    /// notes as a sync resolves them.
    fn read_link_graph(&self) -> Result<LinkGraph> {
        let vault_id = self.snapshot.vault_id;
        let rows = self.connection.run(move |client| async move {
            client
                .query(
                    "SELECT path, links FROM ctxpack_notes WHERE vault = $1",
                    &[&vault_id],
                )
                .await
        })?;
        let metas = &self.snapshot.metas;
        let mut written: Vec<Vec<(String, bool, u32, u32)>> = vec![Vec::new(); metas.len()];
        for row in rows {
            let path: String = row.get(0);
            let bytes: Vec<u8> = row.get(1);
            let Some(source) = self.note_index(&path) else {
                continue;
            };
            written[source] = postcard::from_bytes(&bytes)
                .with_context(|| format!("the store's links of {path} do not decode"))?;
        }
        let resolved = resolve_links(
            metas,
            &LinkResolver::new(metas),
            written,
            |link: &(String, bool, u32, u32)| (link.0.as_str(), link.1),
            |_, target| target,
        );
        let links = resolved
            .into_iter()
            .enumerate()
            .flat_map(|(source, targets)| targets.into_iter().map(move |target| (source, target)));
        Ok(LinkGraph::from_links(metas.len(), links))
    }

    /// Opens the vault called `name` in the store at `url`. Fails, with a
    /// message naming the store (never its password), when the store is
    /// unreachable, refuses the login, was written by another schema
    /// version, or has no such vault.
    pub fn open(url: &StoreUrl, name: &str) -> Result<PgStore> {
        let connection = Connection::open(url, 4)?;
        connection.check_schema()?;
        let snapshot = Arc::new(load_snapshot(&connection, name)?);
        Ok(PgStore {
            connection,
            name: name.to_string(),
            snapshot,
            graph: OnceLock::new(),
            props: OnceLock::new(),
        })
    }

    /// The vault's root folder as the last sync saw it.
    pub fn root(&self) -> PathBuf {
        self.snapshot.root.clone()
    }

    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    pub fn vault_id(&self) -> i32 {
        self.snapshot.vault_id
    }

    pub fn generation(&self) -> i64 {
        self.snapshot.generation
    }

    /// Note index → path, for the vector arm.
    fn note_index(&self, path: &str) -> Option<usize> {
        self.snapshot.metas.search_path(path).ok()
    }

    fn term_rows(&self, terms: &[String]) -> Result<Vec<TermRow>> {
        let vault = self.snapshot.vault_id;
        let terms = terms.to_vec();
        let rows = self.connection.run(move |client| async move {
            client
                .query(
                    "SELECT term, postings, note_df, heading_df, body_df FROM ctxpack_terms \
                     WHERE vault = $1 AND term = ANY($2)",
                    &[&vault, &terms],
                )
                .await
        })?;
        Ok(rows
            .into_iter()
            .map(|row| TermRow {
                term: row.get(0),
                postings: row.get(1),
                note_df: row.get::<_, i32>(2).max(0) as u64,
                heading_df: row.get::<_, i32>(3).max(0) as u64,
                body_df: row.get::<_, i32>(4).max(0) as u64,
            })
            .collect())
    }
}

struct TermRow {
    term: String,
    postings: Vec<u8>,
    note_df: u64,
    heading_df: u64,
    body_df: u64,
}

fn load_snapshot(connection: &Connection, name: &str) -> Result<Snapshot> {
    let wanted = name.to_string();
    let name = name.to_string();
    let (vault, notes) = connection.run(move |client| async move {
        let vault = client
            .query_opt(
                "SELECT id, generation, root, sections, text_tokens, heading_tokens, \
                 body_tokens, roles FROM ctxpack_vaults WHERE name = $1",
                &[&name],
            )
            .await?;
        let Some(vault) = vault else {
            return Ok((None, Vec::new()));
        };
        let id: i32 = vault.get(0);
        let notes = client
            .query(
                "SELECT path, id, meta, norm FROM ctxpack_notes WHERE vault = $1",
                &[&id],
            )
            .await?;
        let files = client
            .query(
                "SELECT path, problems FROM ctxpack_files WHERE vault = $1 AND problems <> ''",
                &[&id],
            )
            .await?;
        // The Bases files the sync read under the policy (none in a private
        // folder): an embed of any other reads as one of nothing, as over
        // the embedded index.
        let bases = client
            .query("SELECT path FROM ctxpack_bases WHERE vault = $1", &[&id])
            .await?;
        Ok((Some((vault, files, bases)), notes))
    })?;
    let Some((vault, files, bases)) = vault else {
        return Err(StoreError::NoVault(connection.shown().to_string(), wanted).into());
    };
    let mut rows: Vec<(String, u32, NoteMeta, u8)> = Vec::with_capacity(notes.len());
    for row in notes {
        let path: String = row.get(0);
        let id: i32 = row.get(1);
        let meta: Vec<u8> = row.get(2);
        let meta: NoteMeta = postcard::from_bytes(&meta)
            .with_context(|| format!("the store's record of {path} does not decode"))?;
        let norm: i16 = row.get(3);
        rows.push((path, id as u32, meta, norm.clamp(0, 255) as u8));
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let mut by_id = FxHashMap::with_capacity_and_hasher(rows.len(), Default::default());
    let mut metas = Vec::with_capacity(rows.len());
    let mut norms = Vec::with_capacity(rows.len());
    for (idx, (_, id, meta, norm)) in rows.into_iter().enumerate() {
        by_id.insert(id, idx);
        metas.push(meta);
        norms.push(norm);
    }
    let roles: Vec<u8> = vault.get(7);
    let roles: Roles = if roles.is_empty() {
        Roles::default()
    } else {
        postcard::from_bytes(&roles).context("the store's vault record does not decode")?
    };
    let index_of = |path: &str| {
        metas
            .binary_search_by(|m: &NoteMeta| m.path.as_str().cmp(path))
            .ok()
    };
    let descriptions = roles
        .descriptions
        .iter()
        .filter_map(|(path, description)| Some((index_of(path)?, description.clone())))
        .collect();
    let hot = roles.hot.iter().filter_map(|path| index_of(path)).collect();
    let mut diagnostics = roles.walk_problems.clone();
    for row in files {
        let path: String = row.get(0);
        let problems: String = row.get(1);
        diagnostics.extend(problems.lines().map(|message| Diagnostic {
            path: path.clone(),
            message: message.to_string(),
        }));
    }
    diagnostics.sort();
    let mut bases: Vec<String> = bases
        .iter()
        .map(|row| row.get::<_, String>(0))
        .filter(|path| crate::vault::walk::is_base(path))
        .collect();
    bases.sort();
    let count = |at: usize| vault.get::<_, i64>(at).max(0) as u64;
    Ok(Snapshot {
        vault_id: vault.get(0),
        generation: vault.get(1),
        root: PathBuf::from(vault.get::<_, String>(2)),
        sections: count(3),
        text_tokens: count(4),
        heading_tokens: count(5),
        body_tokens: count(6),
        metas: Arc::new(MetaTable::new(metas)),
        norms,
        by_id,
        descriptions,
        hot,
        diagnostics,
        bases,
        tables: SharedTables::default(),
    })
}

impl dyn Store {
    /// The PostgreSQL store behind this store (its vectors live there).
    pub fn postgres(&self) -> Option<&PgStore> {
        self.as_any().downcast_ref()
    }
}

impl Store for PgStore {
    fn describe(&self) -> String {
        format!("{} (vault '{}')", self.connection.shown(), self.name)
    }

    fn vault(&self) -> Vault {
        let mut vault = Vault::from_metas(
            self.snapshot.root.clone(),
            Arc::clone(&self.snapshot.metas),
            self.snapshot.descriptions.clone(),
            self.snapshot.hot.clone(),
            self.snapshot.diagnostics.clone(),
        );
        vault.set_bases(self.snapshot.bases.clone());
        vault.share_tables(self.snapshot.tables.clone());
        vault.set_source(Arc::new(StoredTexts {
            connection: self.connection.clone(),
            vault: self.snapshot.vault_id,
            cache: Mutex::new(HashMap::new()),
        }));
        vault
    }

    fn section_count(&self) -> u64 {
        self.snapshot.sections
    }

    fn note_properties(&self) -> Option<Arc<crate::filter::PropertyTable>> {
        self.props
            .get_or_init(|| {
                properties::read_properties(
                    &self.connection,
                    self.snapshot.vault_id,
                    &self.snapshot.metas,
                )
                .ok()
            })
            .clone()
    }

    fn filtered_notes(&self, filter: &crate::filter::NoteFilter) -> Option<Result<Vec<bool>>> {
        Some(filters::admitted_notes(
            &self.connection,
            self.snapshot.vault_id,
            filter,
            &self.snapshot.metas,
        ))
    }

    fn present_keys(&self, keys: &[String]) -> Option<Result<Vec<String>>> {
        Some(filters::present_keys(
            &self.connection,
            self.snapshot.vault_id,
            keys,
        ))
    }

    fn scores_every_match(&self) -> bool {
        true
    }

    fn search_notes_kept(
        &self,
        text: &str,
        limit: usize,
        keep: &dyn Fn(usize) -> bool,
    ) -> Option<Result<Vec<(usize, f32)>>> {
        // Every matching note is scored: the cut comes after the filter,
        // which is asked in rank order and only until `limit` are kept.
        Some(self.search_notes(text, usize::MAX).map(|hits| {
            hits.into_iter()
                .filter(|(note, _)| keep(*note))
                .take(limit)
                .collect()
        }))
    }

    fn search_notes(&self, text: &str, limit: usize) -> Result<Vec<(usize, f32)>> {
        let terms = query_terms(text);
        if terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let snapshot = &self.snapshot;
        let docs = snapshot.metas.len() as u64;
        let mut rows = self.term_rows(&terms)?;
        // Summed in the query's term order, as the clauses are given.
        rows.sort_by_key(|row| terms.iter().position(|t| *t == row.term));
        // Dense by note index: a common term's postings cover most notes.
        let mut scores = vec![0f32; snapshot.metas.len()];
        let mut matched = vec![false; snapshot.metas.len()];
        let mut hits: Vec<(usize, f32)> = Vec::new();
        for row in rows {
            let weight = bm25_weight(row.note_df, docs, snapshot.text_tokens, 1.0);
            let postings = decode_postings(&row.postings)
                .ok_or_else(|| anyhow!("the store's postings of '{}' do not decode", row.term))?;
            for (id, tf) in postings {
                if let Some(&idx) = snapshot.by_id.get(&id) {
                    scores[idx] += weight.score(snapshot.norms[idx], tf);
                    if !std::mem::replace(&mut matched[idx], true) {
                        hits.push((idx, 0.0));
                    }
                }
            }
        }
        for hit in &mut hits {
            hit.1 = scores[hit.0];
        }
        // Note indexes follow path order, so this is score, then path.
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.truncate(limit);
        Ok(hits)
    }

    fn section_idf(&self, terms: &[String]) -> Vec<f64> {
        let rows = self.term_rows(terms).unwrap_or_default();
        let n = self.snapshot.sections.max(1) as f64;
        terms
            .iter()
            .map(|term| {
                let df = rows
                    .iter()
                    .find(|row| row.term == *term)
                    .map_or(0.0, |row| row.body_df as f64)
                    .min(n);
                (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
            })
            .collect()
    }

    fn search_sections(
        &self,
        text: &str,
        paths: &[&str],
        limit: usize,
    ) -> Result<Vec<(String, usize, f32)>> {
        let terms = query_terms(text);
        if terms.is_empty() || paths.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let snapshot = &self.snapshot;
        let docs = snapshot.sections.max(1);
        let rows = self.term_rows(&terms)?;
        let weights: Vec<(String, _, _)> = terms
            .iter()
            .filter_map(|term| {
                let row = rows.iter().find(|row| row.term == *term)?;
                Some((
                    term.clone(),
                    bm25_weight(row.heading_df, docs, snapshot.heading_tokens, 1.5),
                    bm25_weight(row.body_df, docs, snapshot.body_tokens, 1.0),
                ))
            })
            .collect();
        if weights.is_empty() {
            return Ok(Vec::new());
        }
        let vault = snapshot.vault_id;
        let wanted: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
        let notes = self.connection.run(move |client| async move {
            client
                .query(
                    "SELECT path, terms FROM ctxpack_notes WHERE vault = $1 AND path = ANY($2)",
                    &[&vault, &wanted],
                )
                .await
        })?;
        let mut hits = Vec::new();
        for row in notes {
            let path: String = row.get(0);
            let bytes: Vec<u8> = row.get(1);
            let note = NoteTerms::decode(&bytes)
                .with_context(|| format!("the store's terms of {path} do not decode"))?;
            let indexed: Vec<_> = weights
                .iter()
                .filter_map(|(term, heading, body)| Some((note.index_of(term)?, heading, body)))
                .collect();
            for (ordinal, section) in note.sections.iter().enumerate() {
                let mut score = 0f32;
                let mut matched = false;
                for &(index, heading, body) in &indexed {
                    for (field, weight) in [(&section.heading, heading), (&section.body, body)] {
                        let tf = field.tf(index);
                        if tf > 0 {
                            score += weight.score(field.norm_id(), tf);
                            matched = true;
                        }
                    }
                }
                if matched {
                    hits.push((path.clone(), ordinal, score));
                }
            }
        }
        order_hits(&mut hits, limit);
        Ok(hits)
    }

    fn link_graph(&self) -> Option<Arc<LinkGraph>> {
        self.graph
            .get_or_init(|| self.read_link_graph().ok().map(Arc::new))
            .clone()
    }

    fn backlink_entries(&self, targets: &[usize]) -> HashMap<usize, Vec<LinkEntry>> {
        let mut entries: HashMap<usize, Vec<LinkEntry>> = HashMap::new();
        let paths: Vec<String> = targets
            .iter()
            .filter_map(|&t| self.snapshot.metas.get(t).map(|m| m.path.clone()))
            .collect();
        let vault_id = self.snapshot.vault_id;
        let Ok(rows) = self.connection.run(move |client| async move {
            client
                .query(
                    "SELECT target, entries FROM ctxpack_backlinks WHERE vault = $1 AND target = ANY($2)",
                    &[&vault_id, &paths],
                )
                .await
        }) else {
            return entries;
        };
        for row in rows {
            let target: String = row.get(0);
            let bytes: Vec<u8> = row.get(1);
            let (Some(target), Ok(list)) = (
                self.note_index(&target),
                postcard::from_bytes::<Vec<(String, u32, u32)>>(&bytes),
            ) else {
                continue;
            };
            let list = list
                .into_iter()
                .filter_map(|(source, start, end)| Some((self.note_index(&source)?, start, end)))
                .collect();
            entries.insert(target, list);
        }
        entries
    }

    fn feedback(&self) -> Result<FeedbackStore> {
        let vault = self.snapshot.vault_id;
        let rows = self.connection.run(move |client| async move {
            client
                .query(
                    "SELECT path, count(*) FILTER (WHERE useful), count(*) FILTER (WHERE NOT useful) \
                     FROM ctxpack_feedback WHERE vault = $1 GROUP BY path",
                    &[&vault],
                )
                .await
        })?;
        let mut store = FeedbackStore::default();
        for row in rows {
            store.notes.insert(
                row.get(0),
                Counts {
                    useful: row.get::<_, i64>(1).max(0) as u64,
                    not_useful: row.get::<_, i64>(2).max(0) as u64,
                },
            );
        }
        Ok(store)
    }

    fn record_feedback(&self, path: &str, useful: bool) -> Result<Counts> {
        let vault = self.snapshot.vault_id;
        let path = path.to_string();
        let row = self.connection.run(move |client| async move {
            client
                .execute(
                    "INSERT INTO ctxpack_feedback (vault, path, useful) VALUES ($1, $2, $3)",
                    &[&vault, &path, &useful],
                )
                .await?;
            client
                .query_one(
                    "SELECT count(*) FILTER (WHERE useful), count(*) FILTER (WHERE NOT useful) \
                     FROM ctxpack_feedback WHERE vault = $1 AND path = $2",
                    &[&vault, &path],
                )
                .await
        })?;
        Ok(Counts {
            useful: row.get::<_, i64>(0).max(0) as u64,
            not_useful: row.get::<_, i64>(1).max(0) as u64,
        })
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn is_stale(&self) -> bool {
        let vault = self.snapshot.vault_id;
        let generation = self.connection.run(move |client| async move {
            client
                .query_opt(
                    "SELECT generation FROM ctxpack_vaults WHERE id = $1",
                    &[&vault],
                )
                .await
        });
        // A store that cannot be asked is not known to have changed; the
        // next call reports the failure itself.
        match generation {
            Ok(Some(row)) => row.get::<_, i64>(0) != self.snapshot.generation,
            Ok(None) => true,
            Err(_) => false,
        }
    }
}

/// Note texts read from the store, as the sync stored them (the privacy
/// policy already applied), fetched a batch at a time.
#[derive(Debug)]
struct StoredTexts {
    connection: Connection,
    vault: i32,
    cache: Mutex<HashMap<String, Option<SourcedText>>>,
}

impl NoteSource for StoredTexts {
    fn fetch(&self, paths: &[&str]) -> Vec<Option<SourcedText>> {
        let mut missing: Vec<String> = Vec::new();
        if let Ok(cache) = self.cache.lock() {
            missing.extend(
                paths
                    .iter()
                    .filter(|p| !cache.contains_key(**p))
                    .map(|p| p.to_string()),
            );
        }
        missing.sort();
        missing.dedup();
        if !missing.is_empty() {
            let vault = self.vault;
            let wanted = missing.clone();
            let rows = self
                .connection
                .run(move |client| async move {
                    client
                        .query(
                            "SELECT path, body, redactions FROM ctxpack_notes \
                             WHERE vault = $1 AND path = ANY($2)",
                            &[&vault, &wanted],
                        )
                        .await
                })
                .unwrap_or_default();
            if let Ok(mut cache) = self.cache.lock() {
                for path in &missing {
                    cache.insert(path.clone(), None);
                }
                for row in rows {
                    let path: String = row.get(0);
                    let Some(body) = unpack_body(row.get(1)) else {
                        continue;
                    };
                    let redactions: Vec<u8> = row.get(2);
                    let redactions: Vec<Redaction> =
                        postcard::from_bytes(&redactions).unwrap_or_default();
                    cache.insert(
                        path,
                        Some(SourcedText {
                            text: body,
                            redactions,
                        }),
                    );
                }
            }
        }
        let Ok(cache) = self.cache.lock() else {
            return vec![None; paths.len()];
        };
        paths
            .iter()
            .map(|p| cache.get(*p).cloned().flatten())
            .collect()
    }

    fn fetch_base(&self, path: &str, max_bytes: u64) -> Option<String> {
        let (vault, path) = (self.vault, path.to_string());
        let row = self
            .connection
            .run(move |client| async move {
                client
                    .query_opt(
                        "SELECT body FROM ctxpack_bases WHERE vault = $1 AND path = $2",
                        &[&vault, &path],
                    )
                    .await
            })
            .ok()??;
        let body: String = row.get(0);
        (body.len() as u64 <= max_bytes).then_some(body)
    }
}

/// A note's text as the store keeps it: its length (u32, little-endian),
/// then one lz4 block. Compressed here, on the syncing client's threads,
/// because PostgreSQL's own compression of the text took most of the
/// server's time in a sync.
pub(crate) fn pack_body(text: &str) -> Vec<u8> {
    lz4_flex::block::compress_prepend_size(text.as_bytes())
}

/// A stored note text, or `None` when the row does not decode: a declared
/// length over the largest note read or other than the block's, a broken
/// block, or invalid UTF-8.
pub(crate) fn unpack_body(bytes: &[u8]) -> Option<String> {
    let (length, block) = bytes.split_first_chunk::<4>()?;
    let length = u32::from_le_bytes(*length) as usize;
    if length as u64 > crate::vault::MAX_FILE_BYTES {
        return None;
    }
    let text = lz4_flex::block::decompress(block, length).ok()?;
    if text.len() != length {
        return None;
    }
    String::from_utf8(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_text_decodes_to_itself_and_a_damaged_one_to_nothing() {
        for text in ["", "# Raft\n\nA leader is elected.", "混合 mixed 中文 text"] {
            assert_eq!(unpack_body(&pack_body(text)).as_deref(), Some(text));
        }
        let long = "the log is replicated to every follower. ".repeat(2_000);
        let packed = pack_body(&long);
        assert!(packed.len() < long.len() / 4, "{}", packed.len());
        assert!(unpack_body(&packed).as_deref() == Some(long.as_str()));

        // Too short for a length; a length past the largest note; a block
        // cut short; a length that the block does not fill; bytes that are
        // not UTF-8.
        assert_eq!(unpack_body(&[1, 0]), None);
        let mut huge = packed.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(unpack_body(&huge), None);
        assert_eq!(unpack_body(&packed[..packed.len() / 2]), None);
        let mut longer = packed.clone();
        longer[..4].copy_from_slice(&(long.len() as u32 + 1).to_le_bytes());
        assert_eq!(unpack_body(&longer), None);
        let not_utf8 = lz4_flex::block::compress_prepend_size(&[0xff, 0xfe, 0x41]);
        assert_eq!(unpack_body(&not_utf8), None);
    }
}
