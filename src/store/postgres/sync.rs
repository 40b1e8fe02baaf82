//! `ctxpack index --store`: brings one vault's rows in the store up to date
//! with its folder, in one transaction under the vault's advisory lock.
//!
//! Files are compared by size and mtime, confirmed by content hash (the
//! policy's fingerprint included, as the embedded index does); only changed
//! notes are parsed, and only the terms they touch are rewritten. Killed at
//! any point, the transaction rolls back and the store keeps the last
//! complete sync; a second sync of the same vault waits for the first.

use std::collections::{BTreeMap, HashMap, HashSet};

use rustc_hash::FxHashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use tantivy::tokenizer::TextAnalyzer;

use anyhow::{Context, Result, anyhow};
use rayon::prelude::*;
use tokio_postgres::Transaction;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};

use super::Roles;
use super::connection::{Connection, StoreUrl, describe};
use super::terms::{Contribution, NoteCounts, NoteTerms, decode_postings, encode_postings};
use crate::analysis::{
    FileEntry, LinkEntry, Pending, first_backlinks, raw_links, read_and_parse, resolve_links,
    walk_diagnostics,
};
use crate::note::{Diagnostic, NoteMeta};
use crate::note_tables::MetaTable;
use crate::privacy::Policy;
use crate::store::UpdateReport;
use crate::vault::{LinkResolver, MAX_FILE_BYTES, Vault, walk};

/// Rows written per statement.
const BATCH: usize = 2_000;

/// Files read and parsed while the chunk before is written.
const PIPELINE_CHUNK: usize = 1_024;

/// What to sync, and under which name.
#[derive(Clone, Debug)]
pub(crate) struct SyncOptions {
    /// The vault's id in the store.
    pub name: String,
    /// Folders outside the vault's view (never read).
    pub hidden: Vec<String>,
    pub policy: Arc<Policy>,
    pub max_file_bytes: u64,
}

impl SyncOptions {
    pub(crate) fn new(name: String, policy: Arc<Policy>) -> SyncOptions {
        SyncOptions {
            name,
            hidden: Vec::new(),
            policy,
            max_file_bytes: MAX_FILE_BYTES,
        }
    }
}

/// A file row as stored.
struct StoredFile {
    size: i64,
    mtime_ns: i64,
    hash: Vec<u8>,
    is_note: bool,
}

/// A link as stored: raw target, written as a Markdown link, sentence range.
type StoredLink = (String, bool, u32, u32);

/// A term's row: postings, heading and body document frequencies.
type TermState = (Vec<(u32, u32)>, i64, i64);

/// A note to write, serialized on the reading threads.
struct NewNote {
    path: String,
    meta: Vec<u8>,
    /// The text, compressed ([`super::pack_body`]).
    body: Vec<u8>,
    redactions: Vec<u8>,
    norm: i16,
    terms: Vec<u8>,
    links: Vec<u8>,
    /// What filters read of it.
    props: super::properties::PropertyRow,
    counts: NoteCounts,
    contributions: Vec<(String, Contribution)>,
}

/// One file as the reading threads hand it over.
struct Parsed {
    entry: FileEntry,
    note: Option<NewNote>,
    previous_hash: Option<[u8; 32]>,
}

impl Parsed {
    fn read(
        root: &Path,
        analyzer: &mut TextAnalyzer,
        item: &Pending,
        max_bytes: u64,
        policy: &Policy,
    ) -> Parsed {
        let (entry, prepared) = read_and_parse(root, item, max_bytes, policy);
        let note = prepared.map(|prepared| {
            let terms = NoteTerms::of(analyzer, &prepared.note);
            let links: Vec<StoredLink> = raw_links(&prepared.note)
                .into_iter()
                .map(|l| (l.target, l.markdown, l.context.0, l.context.1))
                .collect();
            let encoded = terms.encode();
            let norm = i16::from(terms.text.norm_id());
            let (counts, contributions) = terms.into_contributions();
            NewNote {
                path: prepared.note.meta.path.clone(),
                meta: postcard::to_allocvec(&prepared.note.meta).unwrap_or_default(),
                body: super::pack_body(&prepared.text),
                redactions: postcard::to_allocvec(&prepared.note.redactions).unwrap_or_default(),
                norm,
                terms: encoded,
                links: postcard::to_allocvec(&links).unwrap_or_default(),
                props: super::properties::PropertyRow::of(&prepared.note),
                counts,
                contributions,
            }
        });
        Parsed {
            entry,
            note,
            previous_hash: item.previous_hash,
        }
    }
}

/// A file row to write.
struct FileRow {
    path: String,
    size: i64,
    mtime_ns: i64,
    hash: Vec<u8>,
    is_note: bool,
    problems: String,
}

/// A sync that found, once it held the vault's lock, that the privacy
/// policy on disk (or the project's tree) is no longer the one it was
/// given: another sync may have committed under the newer one since, and
/// this one must not write the older view back. Nothing is committed; the
/// caller runs it again with the policy read afresh.
#[derive(Debug)]
pub(crate) struct Overtaken(pub String);

impl std::fmt::Display for Overtaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} changed while the sync waited for the store; run it again",
            self.0
        )
    }
}

impl std::error::Error for Overtaken {}

/// Syncs the vault at `root` (canonical) into the store at `url`.
pub(crate) fn sync(url: &StoreUrl, root: &Path, options: &SyncOptions) -> Result<UpdateReport> {
    let connection = Connection::open(url, 1)?;
    connection.migrate()?;
    let root = root.to_path_buf();
    let options = options.clone();
    let shown = connection.shown().to_string();
    connection.run_with(move |mut client| async move {
        let tx = client
            .transaction()
            .await
            .map_err(|err| anyhow!("store {shown}: {}", describe(&err)))?;
        let report = sync_in(&tx, &root, &options)
            .await
            .with_context(|| format!("cannot sync into the store {shown}"))?;
        let _phase = crate::timings::phase("sync: commit");
        tx.commit()
            .await
            .map_err(|err| anyhow!("store {shown}: cannot commit the sync: {}", describe(&err)))?;
        Ok(report)
    })
}

/// One vault of a project sync: its folder and how it is synced.
pub(crate) struct ProjectPart {
    pub root: std::path::PathBuf,
    pub options: SyncOptions,
}

/// What a project sync did: each part's report (in the order given) and
/// how many of the project's files that are not notes (the recipe,
/// schemas, bindings) were added, changed and removed.
pub(crate) struct ProjectReport {
    pub parts: Vec<UpdateReport>,
    pub others: [usize; 3],
}

/// Syncs a writing project in one transaction: its own vault (the first
/// part, which also gets `entries`, the project's tree), then the other
/// parts (its libraries, each a vault of its own). Killed at any point,
/// nothing of it is committed: a reader sees the last complete sync.
/// `entries` reads the project's tree once the vaults' locks are held, so
/// that no sync that started earlier writes an older tree over a newer.
pub(crate) fn sync_project(
    url: &StoreUrl,
    parts: Vec<ProjectPart>,
    entries: impl FnOnce() -> Result<Vec<super::project::ProjectEntry>> + Send + 'static,
) -> Result<ProjectReport> {
    let connection = Connection::open(url, 1)?;
    connection.migrate()?;
    let shown = connection.shown().to_string();
    connection.run_with(move |mut client| async move {
        let tx = client
            .transaction()
            .await
            .map_err(|err| anyhow!("store {shown}: {}", describe(&err)))?;
        let mut reports = Vec::with_capacity(parts.len());
        for part in &parts {
            reports.push(
                sync_in(&tx, &part.root, &part.options)
                    .await
                    .with_context(|| format!("cannot sync into the store {shown}"))?,
            );
        }
        let entries = entries()?;
        let name = parts
            .first()
            .map(|p| p.options.name.clone())
            .unwrap_or_default();
        let vault: i32 = tx
            .query_one("SELECT id FROM ctxpack_vaults WHERE name = $1", &[&name])
            .await?
            .get(0);
        let (entries_changed, others) =
            super::project::write_entries(&tx, vault, &entries)
                .await
                .with_context(|| format!("cannot sync the project into the store {shown}"))?;
        if entries_changed > 0 {
            // Readers that cache by generation see the project changed.
            tx.execute(
                "UPDATE ctxpack_vaults SET generation = generation + 1 WHERE id = $1",
                &[&vault],
            )
            .await?;
        }
        #[cfg(debug_assertions)]
        if let Ok(pause) = std::env::var("CTXPACK_TEST_PAUSE_PROJECT_SYNC_MS")
            && let Ok(ms) = pause.parse::<u64>()
        {
            // Tests kill a sync here, its rows written, not committed.
            println!("project sync: written, committing");
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        tx.commit()
            .await
            .map_err(|err| anyhow!("store {shown}: cannot commit the sync: {}", describe(&err)))?;
        Ok(ProjectReport {
            parts: reports,
            others,
        })
    })
}

async fn sync_in(tx: &Transaction<'_>, root: &Path, options: &SyncOptions) -> Result<UpdateReport> {
    let name = options.name.as_str();
    let root_text = root.to_string_lossy().to_string();
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
        &[&format!("ctxpack vault {name}")],
    )
    .await?;
    // Only now, the lock held, is what this sync reads the vault's
    // latest: a sync that walked before another committed would write
    // its older view (a note since made private among it) over the newer.
    let current = Policy::load(root).map(|policy| policy.fingerprint().to_string());
    if current.ok().as_deref() != Some(options.policy.fingerprint()) {
        return Err(Overtaken(format!("the privacy policy of {}", root.display())).into());
    }
    let walked = {
        let _phase = crate::timings::phase("sync: walk");
        walk::walk(root, &options.hidden)
    };
    tx.execute(
        "INSERT INTO ctxpack_vaults (name, root) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        &[&name, &root_text],
    )
    .await?;
    let vault = tx
        .query_one(
            "SELECT id, policy, next_note_id, notes, sections, text_tokens, heading_tokens, \
             body_tokens, roles, root FROM ctxpack_vaults WHERE name = $1 FOR UPDATE",
            &[&name],
        )
        .await?;
    let vault_id: i32 = vault.get(0);
    let stored_policy: String = vault.get(1);
    let mut next_id: i32 = vault.get(2);
    let mut totals = Totals {
        notes: i64::from(vault.get::<_, i32>(3)),
        sections: vault.get(4),
        text_tokens: vault.get(5),
        heading_tokens: vault.get(6),
        body_tokens: vault.get(7),
    };
    let stored_roles: Vec<u8> = vault.get(8);
    let stored_roles: Roles = postcard::from_bytes(&stored_roles).unwrap_or_default();
    let stored_root: String = vault.get(9);
    let policy_changed = stored_policy != options.policy.fingerprint();

    let mut stored: HashMap<String, StoredFile> = HashMap::new();
    for row in tx
        .query(
            "SELECT path, size, mtime_ns, hash, is_note FROM ctxpack_files WHERE vault = $1",
            &[&vault_id],
        )
        .await?
    {
        stored.insert(
            row.get(0),
            StoredFile {
                size: row.get(1),
                mtime_ns: row.get(2),
                hash: row.get(3),
                is_note: row.get(4),
            },
        );
    }

    // A vault's first sync: no row of it exists, so none can conflict, and
    // rows go in with COPY rather than as upserts.
    let fresh = stored.is_empty()
        && !tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM ctxpack_notes WHERE vault = $1) \
                 OR EXISTS (SELECT 1 FROM ctxpack_terms WHERE vault = $1)",
                &[&vault_id],
            )
            .await?
            .get::<_, bool>(0);

    let walk_problems = walk_diagnostics(walked.problems, &options.policy);
    let mut report = UpdateReport::default();
    let mut pending = Vec::new();
    let mut seen: HashSet<&str> = HashSet::with_capacity(walked.files.len());
    for found in &walked.files {
        seen.insert(found.rel_path.as_str());
        let old = stored.get(&found.rel_path);
        match (old, found.stat) {
            (Some(old), Some((size, mtime)))
                if !policy_changed
                    && old.size == size as i64
                    && old.mtime_ns == clamp_ns(mtime) =>
            {
                report.unchanged += 1;
            }
            (old, stat) => pending.push(Pending {
                found: found.clone(),
                stat,
                previous_hash: old.and_then(|o| <[u8; 32]>::try_from(o.hash.as_slice()).ok()),
            }),
        }
    }
    let removed_files: Vec<String> = stored
        .keys()
        .filter(|path| !seen.contains(path.as_str()))
        .cloned()
        .collect();
    let root_moved = stored_root != root_text;
    if pending.is_empty()
        && removed_files.is_empty()
        && walk_problems == stored_roles.walk_problems
        && !root_moved
    {
        return Ok(report);
    }

    // Other threads read and parse what may have changed, a chunk at a
    // time, while this one writes the chunk before: the server's work and
    // the parsing overlap, and only two chunks' texts are held at once.
    let write_phase = crate::timings::phase("sync: read, parse, write");
    let (sender, receiver) = std::sync::mpsc::sync_channel::<(Vec<Parsed>, BatchShares)>(1);
    let policy = Arc::clone(&options.policy);
    let max_bytes = options.max_file_bytes;
    let reading_root = root.to_path_buf();
    let reader = std::thread::spawn(move || {
        for chunk in pending.chunks(PIPELINE_CHUNK) {
            let mut parsed: Vec<Parsed> = chunk
                .par_iter()
                .map_init(crate::analysis::analyzer::analyzer, |analyzer, item| {
                    Parsed::read(&reading_root, analyzer, item, max_bytes, &policy)
                })
                .collect();
            let shares = gather_shares(&mut parsed);
            if sender.send((parsed, shares)).is_err() {
                break;
            }
        }
    });
    let mut deltas: FxHashMap<String, TermDelta> = FxHashMap::default();
    while let Ok((batch, shares)) = tokio::task::block_in_place(|| receiver.recv()) {
        let batch_len = batch.len();
        let mut file_rows = Vec::with_capacity(batch_len);
        let mut new_notes = Vec::new();
        // The batch place of each note in `new_notes`.
        let mut new_places = Vec::new();
        // Notes whose stored version goes: changed, or no longer notes.
        let mut gone: Vec<String> = Vec::new();
        let mut dropped_rows: Vec<String> = Vec::new();
        let mut retimed: Vec<NewNote> = Vec::new();
        for (
            place,
            Parsed {
                entry,
                note,
                previous_hash,
            },
        ) in batch.into_iter().enumerate()
        {
            let same = previous_hash == Some(entry.hash) && entry.hash != [0; 32];
            let was_note = stored.get(&entry.path).is_some_and(|f| f.is_note);
            // A file the policy keeps out has no row at all (not even its
            // path, size or hash: any reader of the store could see them);
            // it is read again at each sync to find it private again.
            let private = !entry.is_note
                && entry.problems.is_empty()
                && entry.hash != [0; 32]
                && !crate::vault::walk::ROLE_FILES.contains(&entry.path.as_str());
            if private {
                if previous_hash.is_some() {
                    report.changed += 1;
                    if was_note {
                        gone.push(entry.path.clone());
                    }
                    dropped_rows.push(entry.path);
                } else {
                    report.unchanged += 1;
                }
                continue;
            }
            if same && entry.is_note == was_note {
                report.unchanged += 1;
                // Its date may be its file's time, which did change.
                retimed.extend(note);
            } else {
                if previous_hash.is_some() {
                    report.changed += 1;
                } else {
                    report.added += 1;
                }
                if was_note {
                    gone.push(entry.path.clone());
                }
                if let Some(note) = note {
                    new_notes.push(note);
                    new_places.push(place);
                }
            }
            file_rows.push(FileRow {
                path: entry.path,
                size: entry.size as i64,
                mtime_ns: clamp_ns(entry.mtime_ns),
                hash: entry.hash.to_vec(),
                is_note: entry.is_note,
                problems: entry.problems.join("\n"),
            });
        }
        let rows: Vec<(&str, &[u8], Option<i64>)> = retimed
            .iter()
            .map(|note| (note.path.as_str(), note.meta.as_slice(), note.props.updated))
            .collect();
        write_dates(tx, vault_id, &rows).await?;
        let ids = forget_notes(tx, vault_id, &gone, &mut totals, &mut deltas).await?;
        super::properties::forget_properties(tx, vault_id, &gone).await?;
        if !dropped_rows.is_empty() {
            tx.execute(
                "DELETE FROM ctxpack_files WHERE vault = $1 AND path = ANY($2)",
                &[&vault_id, &dropped_rows],
            )
            .await?;
        }
        let mut new_ids = Vec::with_capacity(new_notes.len());
        let mut id_at: Vec<Option<u32>> = vec![None; batch_len];
        for (note, place) in new_notes.iter().zip(&new_places) {
            let id = match ids.get(&note.path) {
                Some(&id) => id,
                None => {
                    let id = next_id;
                    next_id = next_id
                        .checked_add(1)
                        .context("the store has run out of note ids: rebuild this vault")?;
                    id
                }
            };
            new_ids.push(id);
            id_at[*place] = Some(id as u32);
            totals.apply(&note.counts, 1);
        }
        add_shares(&mut deltas, shares, &id_at);
        if fresh {
            copy_notes(tx, vault_id, &new_notes, &new_ids).await?;
            copy_files(tx, vault_id, &file_rows).await?;
        } else {
            for (chunk, ids) in new_notes.chunks(BATCH).zip(new_ids.chunks(BATCH)) {
                write_notes(tx, vault_id, chunk, ids).await?;
            }
            for chunk in file_rows.chunks(BATCH) {
                write_files(tx, vault_id, chunk).await?;
            }
        }
        let props: Vec<super::properties::PropertyRow> = new_notes
            .iter_mut()
            .map(|note| std::mem::take(&mut note.props))
            .collect();
        super::properties::write_properties(tx, vault_id, &props).await?;
    }
    reader
        .join()
        .map_err(|_| anyhow!("reading the vault's notes failed"))?;
    let gone: Vec<String> = removed_files
        .iter()
        .filter(|path| stored.get(*path).is_some_and(|f| f.is_note))
        .cloned()
        .collect();
    forget_notes(tx, vault_id, &gone, &mut totals, &mut deltas).await?;
    super::properties::forget_properties(tx, vault_id, &gone).await?;
    report.removed = removed_files.len();
    for chunk in removed_files.chunks(BATCH) {
        let chunk = chunk.to_vec();
        tx.execute(
            "DELETE FROM ctxpack_files WHERE vault = $1 AND path = ANY($2)",
            &[&vault_id, &chunk],
        )
        .await?;
    }
    drop(write_phase);
    let terms_phase = crate::timings::phase("sync: terms");
    // Terms: read the touched rows, apply the changes, write them back.
    // Sorted, so the same change writes the same statements in the same order.
    let mut deltas: Vec<(String, TermDelta)> = deltas.into_iter().collect();
    deltas.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let touched: Vec<&str> = deltas.iter().map(|(term, _)| term.as_str()).collect();
    let mut current: FxHashMap<String, TermState> = FxHashMap::default();
    if !stored.is_empty() {
        for chunk in touched.chunks(BATCH * 5) {
            let chunk = chunk.to_vec();
            for row in tx
                .query(
                    "SELECT term, postings, heading_df, body_df FROM ctxpack_terms \
                     WHERE vault = $1 AND term = ANY($2)",
                    &[&vault_id, &chunk],
                )
                .await?
            {
                let term: String = row.get(0);
                let bytes: Vec<u8> = row.get(1);
                let postings = decode_postings(&bytes)
                    .with_context(|| format!("the stored postings of '{term}' do not decode"))?;
                current.insert(
                    term,
                    (
                        postings,
                        i64::from(row.get::<_, i32>(2)),
                        i64::from(row.get::<_, i32>(3)),
                    ),
                );
            }
        }
    }
    let merging = crate::timings::phase("sync: terms: merge");
    let mut upserts: Vec<(String, Vec<u8>, i32, i32, i32)> = Vec::new();
    let mut deletes: Vec<String> = Vec::new();
    for (term, delta) in deltas {
        let (mut postings, heading_df, body_df) = current.remove(&term).unwrap_or_default();
        if !delta.removed.is_empty() {
            let removed: HashSet<u32> = delta.removed.into_iter().collect();
            postings.retain(|(id, _)| !removed.contains(id));
        }
        postings.extend(delta.added);
        postings.sort_unstable();
        let heading_df = (heading_df + delta.heading_df).max(0);
        let body_df = (body_df + delta.body_df).max(0);
        if postings.is_empty() && heading_df == 0 && body_df == 0 {
            deletes.push(term);
        } else {
            upserts.push((
                term,
                encode_postings(&postings),
                postings.len() as i32,
                heading_df as i32,
                body_df as i32,
            ));
        }
    }
    drop(merging);
    let _writing = crate::timings::phase("sync: terms: write");
    for chunk in deletes.chunks(BATCH * 5) {
        let chunk = chunk.to_vec();
        tx.execute(
            "DELETE FROM ctxpack_terms WHERE vault = $1 AND term = ANY($2)",
            &[&vault_id, &chunk],
        )
        .await?;
    }
    if fresh {
        copy_terms(tx, vault_id, &upserts).await?;
    } else {
        for chunk in upserts.chunks(BATCH * 5) {
            write_terms(tx, vault_id, chunk).await?;
        }
    }

    drop(_writing);
    drop(terms_phase);
    let _relink_phase = crate::timings::phase("sync: links and roles");
    // Links resolve against the final set of notes, so a change anywhere
    // can move any backlink: recompute them all, write what differs.
    let base_paths: Vec<String> = walked
        .files
        .iter()
        .filter(|f| walk::is_base(&f.rel_path))
        .map(|f| f.rel_path.clone())
        .collect();
    let roles = relink(
        tx,
        vault_id,
        root,
        &options.policy,
        walk_problems,
        base_paths,
    )
    .await?;

    let updated_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    tx.execute(
        "UPDATE ctxpack_vaults SET generation = generation + 1, policy = $2, next_note_id = $3, \
         notes = $4, sections = $5, text_tokens = $6, heading_tokens = $7, body_tokens = $8, \
         roles = $9, root = $10, updated_at = $11 WHERE id = $1",
        &[
            &vault_id,
            &options.policy.fingerprint(),
            &next_id,
            &(totals.notes as i32),
            &totals.sections,
            &totals.text_tokens,
            &totals.heading_tokens,
            &totals.body_tokens,
            &postcard::to_allocvec(&roles)?,
            &root_text,
            &updated_at,
        ],
    )
    .await?;
    Ok(report)
}

/// At most this many Bases files of a vault are kept in the store.
const MAX_SYNCED_BASES: usize = 1000;

/// Replaces the vault's Bases files with `bases` (few and small: a sync
/// that changes anything rewrites them all).
async fn write_bases(tx: &Transaction<'_>, vault: i32, bases: &[(String, String)]) -> Result<()> {
    tx.execute("DELETE FROM ctxpack_bases WHERE vault = $1", &[&vault])
        .await?;
    let paths: Vec<&str> = bases.iter().map(|b| b.0.as_str()).collect();
    let bodies: Vec<&str> = bases.iter().map(|b| b.1.as_str()).collect();
    tx.execute(
        "INSERT INTO ctxpack_bases (vault, path, body) SELECT $1, * FROM unnest($2::text[], $3::text[])",
        &[&vault, &paths, &bodies],
    )
    .await?;
    Ok(())
}

/// Nanoseconds since the epoch as a database `bigint` (good until 2262).
fn clamp_ns(ns: i128) -> i64 {
    ns.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

#[derive(Default)]
struct TermDelta {
    removed: Vec<u32>,
    added: Vec<(u32, u32)>,
    heading_df: i64,
    body_df: i64,
}

/// The vault-wide counts BM25 needs.
struct Totals {
    notes: i64,
    sections: i64,
    text_tokens: i64,
    heading_tokens: i64,
    body_tokens: i64,
}

impl Totals {
    fn apply(&mut self, counts: &NoteCounts, sign: i64) {
        self.notes += sign;
        self.sections += sign * counts.sections;
        self.text_tokens += sign * counts.text_tokens;
        self.heading_tokens += sign * counts.heading_tokens;
        self.body_tokens += sign * counts.body_tokens;
    }
}

/// One batch's term shares, gathered on the reading threads: each term
/// once, with the notes holding it by their place in the batch. The writer
/// then looks each term up once per batch, not once per note.
type BatchShares = FxHashMap<String, Vec<(u32, Contribution)>>;

/// Takes the term shares out of a parsed batch, merged by term.
fn gather_shares(batch: &mut [Parsed]) -> BatchShares {
    batch
        .par_iter_mut()
        .enumerate()
        .fold(BatchShares::default, |mut shares, (place, parsed)| {
            if let Some(note) = &mut parsed.note {
                for (term, share) in std::mem::take(&mut note.contributions) {
                    match shares.get_mut(term.as_str()) {
                        Some(notes) => notes.push((place as u32, share)),
                        None => {
                            shares.insert(term, vec![(place as u32, share)]);
                        }
                    }
                }
            }
            shares
        })
        .reduce(BatchShares::default, |a, b| {
            let (mut larger, smaller) = if a.len() >= b.len() { (a, b) } else { (b, a) };
            for (term, mut notes) in smaller {
                larger.entry(term).or_default().append(&mut notes);
            }
            larger
        })
}

/// Adds a batch's shares of the notes written (`id_at`: the id given to
/// the note at each batch place, `None` for one left as stored).
fn add_shares(
    deltas: &mut FxHashMap<String, TermDelta>,
    shares: BatchShares,
    id_at: &[Option<u32>],
) {
    for (term, notes) in shares {
        let mut added = notes
            .into_iter()
            .filter_map(|(place, share)| Some((id_at[place as usize]?, share)))
            .peekable();
        if added.peek().is_none() {
            continue;
        }
        let delta = match deltas.get_mut(term.as_str()) {
            Some(delta) => delta,
            None => deltas.entry(term).or_default(),
        };
        for (id, share) in added {
            if share.tf > 0 {
                delta.added.push((id, share.tf));
            }
            delta.heading_df += i64::from(share.headings);
            delta.body_df += i64::from(share.bodies);
        }
    }
}

/// Takes a stored note's share of `term` out of the term's row.
fn remove_share(
    deltas: &mut FxHashMap<String, TermDelta>,
    term: String,
    share: Contribution,
    id: u32,
) {
    let delta = match deltas.get_mut(term.as_str()) {
        Some(delta) => delta,
        None => deltas.entry(term).or_default(),
    };
    if share.tf > 0 {
        delta.removed.push(id);
    }
    delta.heading_df -= i64::from(share.headings);
    delta.body_df -= i64::from(share.bodies);
}

/// Takes the stored versions of `paths` out of the statistics and posting
/// changes, deletes their rows, and returns their ids (a changed note keeps
/// its id).
async fn forget_notes(
    tx: &Transaction<'_>,
    vault_id: i32,
    paths: &[String],
    totals: &mut Totals,
    deltas: &mut FxHashMap<String, TermDelta>,
) -> Result<FxHashMap<String, i32>> {
    let mut ids = FxHashMap::default();
    for chunk in paths.chunks(BATCH) {
        let chunk = chunk.to_vec();
        for row in tx
            .query(
                "SELECT path, id, terms FROM ctxpack_notes WHERE vault = $1 AND path = ANY($2)",
                &[&vault_id, &chunk],
            )
            .await?
        {
            let path: String = row.get(0);
            let id: i32 = row.get(1);
            let bytes: &[u8] = row.get(2);
            let terms = NoteTerms::decode(bytes)
                .with_context(|| format!("the stored terms of {path} do not decode"))?;
            let (counts, contributions) = terms.into_contributions();
            totals.apply(&counts, -1);
            for (term, share) in contributions {
                remove_share(deltas, term, share, id as u32);
            }
            ids.insert(path, id);
        }
        tx.execute(
            "DELETE FROM ctxpack_notes WHERE vault = $1 AND path = ANY($2)",
            &[&vault_id, &chunk],
        )
        .await?;
    }
    Ok(ids)
}

async fn write_notes(
    tx: &Transaction<'_>,
    vault: i32,
    notes: &[NewNote],
    ids: &[i32],
) -> Result<()> {
    let paths: Vec<&str> = notes.iter().map(|n| n.path.as_str()).collect();
    let metas: Vec<&[u8]> = notes.iter().map(|n| n.meta.as_slice()).collect();
    let bodies: Vec<&[u8]> = notes.iter().map(|n| n.body.as_slice()).collect();
    let redactions: Vec<&[u8]> = notes.iter().map(|n| n.redactions.as_slice()).collect();
    let norms: Vec<i16> = notes.iter().map(|n| n.norm).collect();
    let terms: Vec<&[u8]> = notes.iter().map(|n| n.terms.as_slice()).collect();
    let links: Vec<&[u8]> = notes.iter().map(|n| n.links.as_slice()).collect();
    tx.execute(
        "INSERT INTO ctxpack_notes (vault, path, id, meta, body, redactions, norm, terms, links) \
         SELECT $1, * FROM unnest($2::text[], $3::int4[], $4::bytea[], $5::bytea[], $6::bytea[], \
         $7::int2[], $8::bytea[], $9::bytea[]) \
         ON CONFLICT (vault, path) DO UPDATE SET id = excluded.id, meta = excluded.meta, \
         body = excluded.body, redactions = excluded.redactions, norm = excluded.norm, \
         terms = excluded.terms, links = excluded.links",
        &[
            &vault,
            &paths,
            &ids,
            &metas,
            &bodies,
            &redactions,
            &norms,
            &terms,
            &links,
        ],
    )
    .await?;
    Ok(())
}

async fn write_files(tx: &Transaction<'_>, vault: i32, files: &[FileRow]) -> Result<()> {
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let sizes: Vec<i64> = files.iter().map(|f| f.size).collect();
    let mtimes: Vec<i64> = files.iter().map(|f| f.mtime_ns).collect();
    let hashes: Vec<&[u8]> = files.iter().map(|f| f.hash.as_slice()).collect();
    let notes: Vec<bool> = files.iter().map(|f| f.is_note).collect();
    let problems: Vec<&str> = files.iter().map(|f| f.problems.as_str()).collect();
    tx.execute(
        "INSERT INTO ctxpack_files (vault, path, size, mtime_ns, hash, is_note, problems) \
         SELECT $1, * FROM unnest($2::text[], $3::int8[], $4::int8[], $5::bytea[], $6::bool[], \
         $7::text[]) \
         ON CONFLICT (vault, path) DO UPDATE SET size = excluded.size, \
         mtime_ns = excluded.mtime_ns, hash = excluded.hash, is_note = excluded.is_note, \
         problems = excluded.problems",
        &[&vault, &paths, &sizes, &mtimes, &hashes, &notes, &problems],
    )
    .await?;
    Ok(())
}

async fn write_terms(
    tx: &Transaction<'_>,
    vault: i32,
    rows: &[(String, Vec<u8>, i32, i32, i32)],
) -> Result<()> {
    let terms: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    let postings: Vec<&[u8]> = rows.iter().map(|r| r.1.as_slice()).collect();
    let note_df: Vec<i32> = rows.iter().map(|r| r.2).collect();
    let heading_df: Vec<i32> = rows.iter().map(|r| r.3).collect();
    let body_df: Vec<i32> = rows.iter().map(|r| r.4).collect();
    tx.execute(
        "INSERT INTO ctxpack_terms (vault, term, postings, note_df, heading_df, body_df) \
         SELECT $1, * FROM unnest($2::text[], $3::bytea[], $4::int4[], $5::int4[], $6::int4[]) \
         ON CONFLICT (vault, term) DO UPDATE SET postings = excluded.postings, \
         note_df = excluded.note_df, heading_df = excluded.heading_df, body_df = excluded.body_df",
        &[&vault, &terms, &postings, &note_df, &heading_df, &body_df],
    )
    .await?;
    Ok(())
}

/// Sends rows with `COPY ... FROM STDIN (FORMAT binary)`.
async fn copy_rows<'a>(
    tx: &Transaction<'_>,
    statement: &str,
    types: &[Type],
    rows: impl Iterator<Item = Vec<&'a (dyn ToSql + Sync)>>,
) -> Result<()> {
    let sink = tx.copy_in(statement).await?;
    let mut writer = std::pin::pin!(BinaryCopyInWriter::new(sink, types));
    for row in rows {
        writer.as_mut().write(&row).await?;
    }
    writer.finish().await?;
    Ok(())
}

async fn copy_notes(
    tx: &Transaction<'_>,
    vault: i32,
    notes: &[NewNote],
    ids: &[i32],
) -> Result<()> {
    copy_rows(
        tx,
        "COPY ctxpack_notes (vault, path, id, meta, body, redactions, norm, terms, links) \
         FROM STDIN (FORMAT binary)",
        &[
            Type::INT4,
            Type::TEXT,
            Type::INT4,
            Type::BYTEA,
            Type::BYTEA,
            Type::BYTEA,
            Type::INT2,
            Type::BYTEA,
            Type::BYTEA,
        ],
        notes.iter().zip(ids).map(|(note, id)| {
            let row: Vec<&(dyn ToSql + Sync)> = vec![
                &vault,
                &note.path,
                id,
                &note.meta,
                &note.body,
                &note.redactions,
                &note.norm,
                &note.terms,
                &note.links,
            ];
            row
        }),
    )
    .await
}

async fn copy_files(tx: &Transaction<'_>, vault: i32, files: &[FileRow]) -> Result<()> {
    copy_rows(
        tx,
        "COPY ctxpack_files (vault, path, size, mtime_ns, hash, is_note, problems) \
         FROM STDIN (FORMAT binary)",
        &[
            Type::INT4,
            Type::TEXT,
            Type::INT8,
            Type::INT8,
            Type::BYTEA,
            Type::BOOL,
            Type::TEXT,
        ],
        files.iter().map(|file| {
            let row: Vec<&(dyn ToSql + Sync)> = vec![
                &vault,
                &file.path,
                &file.size,
                &file.mtime_ns,
                &file.hash,
                &file.is_note,
                &file.problems,
            ];
            row
        }),
    )
    .await
}

async fn copy_terms(
    tx: &Transaction<'_>,
    vault: i32,
    rows: &[(String, Vec<u8>, i32, i32, i32)],
) -> Result<()> {
    copy_rows(
        tx,
        "COPY ctxpack_terms (vault, term, postings, note_df, heading_df, body_df) \
         FROM STDIN (FORMAT binary)",
        &[
            Type::INT4,
            Type::TEXT,
            Type::BYTEA,
            Type::INT4,
            Type::INT4,
            Type::INT4,
        ],
        rows.iter()
            .map(|(term, postings, note_df, heading_df, body_df)| {
                let row: Vec<&(dyn ToSql + Sync)> =
                    vec![&vault, term, postings, note_df, heading_df, body_df];
                row
            }),
    )
    .await
}

/// Rewrites the records and filter dates of notes whose text is as stored:
/// their file time changed (a note touched, or checked out again), or
/// whether it is shared did ([`crate::analysis::mark_shared_file_times`]).
/// Each row is a note's path, its record and its date.
async fn write_dates(
    tx: &Transaction<'_>,
    vault_id: i32,
    rows: &[(&str, &[u8], Option<i64>)],
) -> Result<()> {
    for chunk in rows.chunks(BATCH) {
        let paths: Vec<&str> = chunk.iter().map(|row| row.0).collect();
        let records: Vec<&[u8]> = chunk.iter().map(|row| row.1).collect();
        let dates: Vec<Option<i64>> = chunk.iter().map(|row| row.2).collect();
        tx.execute(
            "UPDATE ctxpack_notes n SET meta = r.meta \
             FROM unnest($2::text[], $3::bytea[]) AS r(path, meta) \
             WHERE n.vault = $1 AND n.path = r.path",
            &[&vault_id, &paths, &records],
        )
        .await?;
        tx.execute(
            "UPDATE ctxpack_note_properties p SET updated = r.updated \
             FROM unnest($2::text[], $3::int8[]) AS r(path, updated) \
             WHERE p.vault = $1 AND p.path = r.path",
            &[&vault_id, &paths, &dates],
        )
        .await?;
    }
    Ok(())
}

/// Resolves every note's links against the notes now in the store, writes
/// the backlink rows that changed, and reads the role files (`index.md`,
/// `hot.md`) as the embedded index does.
async fn relink(
    tx: &Transaction<'_>,
    vault_id: i32,
    root: &Path,
    policy: &Arc<Policy>,
    walk_problems: Vec<Diagnostic>,
    base_paths: Vec<String>,
) -> Result<Roles> {
    let reading = crate::timings::phase("sync: links: read");
    let rows = tx
        .query(
            "SELECT path, meta, links FROM ctxpack_notes WHERE vault = $1",
            &[&vault_id],
        )
        .await?;
    let mut notes: Vec<(NoteMeta, Vec<StoredLink>)> = Vec::with_capacity(rows.len());
    for row in rows {
        let path: String = row.get(0);
        let meta: Vec<u8> = row.get(1);
        let links: Vec<u8> = row.get(2);
        let meta: NoteMeta = postcard::from_bytes(&meta)
            .with_context(|| format!("the stored record of {path} does not decode"))?;
        let links = postcard::from_bytes(&links)
            .with_context(|| format!("the stored links of {path} do not decode"))?;
        notes.push((meta, links));
    }
    notes.sort_by(|a, b| a.0.path.cmp(&b.0.path));
    let (mut metas, links): (Vec<NoteMeta>, Vec<_>) = notes.into_iter().unzip();
    drop(reading);
    let remarked = crate::analysis::mark_shared_file_times(&mut metas);
    let records: Vec<Vec<u8>> = remarked
        .iter()
        .map(|&i| postcard::to_allocvec(&metas[i]).unwrap_or_default())
        .collect();
    let rows: Vec<(&str, &[u8], Option<i64>)> = remarked
        .iter()
        .zip(&records)
        .map(|(&i, record)| (metas[i].path.as_str(), record.as_slice(), metas[i].date()))
        .collect();
    write_dates(tx, vault_id, &rows).await?;
    let metas = MetaTable::new(metas);
    let resolving = crate::timings::phase("sync: links: resolve");
    let (backlinks, roles, bases) = tokio::task::block_in_place(|| {
        let resolver = LinkResolver::new(&metas);
        // Resolved and kept as the embedded index resolves and keeps them.
        let resolved: Vec<Vec<(usize, (u32, u32))>> = resolve_links(
            &metas,
            &resolver,
            links,
            |link: &StoredLink| (link.0.as_str(), link.1),
            |link, target| (target, (link.2, link.3)),
        );
        let incoming: Vec<Vec<LinkEntry>> = first_backlinks(
            metas.len(),
            resolved
                .into_iter()
                .enumerate()
                .flat_map(|(source, targets)| {
                    targets
                        .into_iter()
                        .map(move |(target, context)| (source, target, context))
                }),
        );
        let metas = Arc::new(metas);
        let mut role_vault = Vault::from_metas(
            root.to_path_buf(),
            Arc::clone(&metas),
            HashMap::new(),
            Vec::new(),
            Vec::new(),
        );
        role_vault.set_policy(Arc::clone(policy));
        role_vault.set_bases(base_paths);
        // Read as a pack reads them, so the store holds what the policy
        // lets a pack see and nothing more.
        let bases: Vec<(String, String)> = role_vault
            .bases()
            .take(MAX_SYNCED_BASES)
            .filter_map(|path| {
                let text = role_vault.read_base(path, crate::parse::base::MAX_BASE_BYTES)?;
                Some((path.clone(), text))
            })
            .collect();
        let (descriptions, hot) = role_vault.read_role_files();
        let mut descriptions: Vec<(String, String)> = descriptions
            .into_iter()
            .map(|(idx, d)| (metas[idx].path.clone(), d))
            .collect();
        descriptions.sort();
        let roles = Roles {
            descriptions,
            hot: hot.into_iter().map(|idx| metas[idx].path.clone()).collect(),
            walk_problems,
        };
        let backlinks: BTreeMap<String, Vec<u8>> = incoming
            .into_iter()
            .enumerate()
            .filter(|(_, list)| !list.is_empty())
            .map(|(target, list)| {
                let entries: Vec<(&str, u32, u32)> = list
                    .iter()
                    .map(|&(source, start, end)| (metas[source].path.as_str(), start, end))
                    .collect();
                (
                    metas[target].path.clone(),
                    postcard::to_allocvec(&entries).unwrap_or_default(),
                )
            })
            .collect();
        (backlinks, roles, bases)
    });
    drop(resolving);
    let _writing = crate::timings::phase("sync: links: write");
    write_bases(tx, vault_id, &bases).await?;
    let mut stored: HashMap<String, Vec<u8>> = HashMap::new();
    for row in tx
        .query(
            "SELECT target, entries FROM ctxpack_backlinks WHERE vault = $1",
            &[&vault_id],
        )
        .await?
    {
        stored.insert(row.get(0), row.get(1));
    }
    let stale: Vec<String> = stored
        .keys()
        .filter(|target| !backlinks.contains_key(*target))
        .cloned()
        .collect();
    let changed: Vec<(&String, &Vec<u8>)> = backlinks
        .iter()
        .filter(|(target, entries)| stored.get(*target) != Some(entries))
        .collect();
    for chunk in stale.chunks(BATCH * 5) {
        let chunk = chunk.to_vec();
        tx.execute(
            "DELETE FROM ctxpack_backlinks WHERE vault = $1 AND target = ANY($2)",
            &[&vault_id, &chunk],
        )
        .await?;
    }
    for chunk in changed.chunks(BATCH * 5) {
        let targets: Vec<&str> = chunk.iter().map(|c| c.0.as_str()).collect();
        let entries: Vec<&[u8]> = chunk.iter().map(|c| c.1.as_slice()).collect();
        tx.execute(
            "INSERT INTO ctxpack_backlinks (vault, target, entries) \
             SELECT $1, * FROM unnest($2::text[], $3::bytea[]) \
             ON CONFLICT (vault, target) DO UPDATE SET entries = excluded.entries",
            &[&vault_id, &targets, &entries],
        )
        .await?;
    }
    Ok(roles)
}
