//! The semantic arm's vectors: one per chunk (a note's title and summary,
//! and each of its sections), kept in the index folder per model and cached
//! by chunk content hash, so editing one paragraph re-embeds one chunk.
//!
//! Two files per model fingerprint: `vectors-<fp>.meta` (postcard: the
//! notes, their content hashes and their chunks' hashes) and
//! `vectors-<fp>.f32` (the vectors, little-endian, chunk after chunk). Both
//! are written to temporary files and renamed, meta last; a reader that
//! finds them disagreeing rebuilds.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

// What a chunk says is the analysed note's (the PostgreSQL store embeds
// the same chunks); the ANN choice is the stores' common setting.
pub(crate) use crate::analysis::chunk_texts;
use crate::embed::Embedder;
use crate::index::ann::{ANN_THRESHOLD, AnnIndex};
use crate::index::catalog::Catalog;
use crate::index::vector_journal;
use crate::progress::{Event, Progress, Stage};
use crate::safe_fs::write_atomic;
pub(crate) use crate::store::AnnChoice;
use crate::vault::Vault;

/// An ANN search that finds fewer notes than this (after filters) falls
/// back to the exact scan.
const MIN_ANN_NOTES: usize = 10;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Meta {
    model: String,
    fingerprint: String,
    dims: u32,
    notes: Vec<NoteChunks>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct NoteChunks {
    path: String,
    /// The note file's content hash when its chunks were made.
    content: [u8; 32],
    /// Content hashes of its chunks, in order.
    chunks: Vec<[u8; 16]>,
}

/// The vectors of a vault's chunks, aligned with the vault's notes.
pub struct SemanticIndex {
    dims: usize,
    /// For each vault note, the range of its chunks in `vectors`.
    spans: Vec<std::ops::Range<usize>>,
    vectors: Vectors,
    /// How many chunks the last sync embedded (the rest were cached).
    pub embedded: usize,
    pub chunks: usize,
    /// The hash of all chunk hashes in order: what the vectors are.
    key: [u8; 32],
    fingerprint: String,
    ann: Option<AnnIndex>,
    /// The chunks still without a vector, when the vectors were opened
    /// without embedding them all (see [`SemanticIndex::open_bounded`]).
    pending: Option<Pending>,
}

/// What a partly embedded index still lacks, and what this process has
/// embedded of it since (on the fly, for the notes a query asked about).
struct Pending {
    dir: PathBuf,
    /// For each vault note, the hashes of its chunks without a vector;
    /// `None` for a note not chunked yet (see [`UNPLANNED_NOTES`]).
    missing: Vec<Option<Vec<[u8; 16]>>>,
    /// The journal's vectors, where a note chunked on the fly finds those
    /// another process embedded.
    journaled: HashMap<[u8; 16], Vec<f32>>,
    /// Whether the chunk count is an estimate (some notes not chunked yet).
    estimated: bool,
    /// For each vault note, the hashes of its chunks in its span, in order.
    present: Vec<Vec<[u8; 16]>>,
    late: std::sync::RwLock<Late>,
}

/// A chunk's hash and its vector, embedded on the fly.
type LateChunk = ([u8; 16], Vec<f32>);

/// Vectors embedded on the fly, per note, and which chunks they are.
#[derive(Default)]
struct Late {
    /// Per note, its chunks embedded on the fly.
    vectors: HashMap<usize, Vec<LateChunk>>,
    hashes: std::collections::HashSet<[u8; 16]>,
    /// How many chunks of the notes' missing ones now have a vector.
    chunks: usize,
}

/// How much embedding opening a model's vectors may do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EmbedMode {
    /// Never hold a call up: embed at once only when at most
    /// [`OPEN_CHUNKS`] chunks lack a vector; otherwise search what is
    /// embedded and leave the rest to `index`, `serve` or a watcher.
    #[default]
    Bounded,
    /// Embed every chunk that lacks a vector now (`ctxpack index`).
    Complete,
}

/// A vault (or an edit) with at most this many chunks to embed is embedded
/// when the vectors are opened: milliseconds with a static model, about two
/// seconds with multilingual-e5-small on two cores.
pub(crate) const OPEN_CHUNKS: usize = 64;

/// The bound on one ranking's embedding on the fly: at most `chunks`
/// chunks, and no batch started after `time`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OnTheFly {
    pub chunks: usize,
    pub time: std::time::Duration,
}

/// 64 chunks or 300 ms, whichever comes first: a static model embeds the
/// 64 in milliseconds; multilingual-e5-small (~35 chunks/s on two cores)
/// about ten, in batches of [`ON_THE_FLY_BATCH`].
pub(crate) const ON_THE_FLY: OnTheFly = OnTheFly {
    chunks: 64,
    time: std::time::Duration::from_millis(300),
};

/// The least a served model is given for one batch on the fly: enough for
/// a round trip on a local network, and still a bound when the server
/// hangs.
const MIN_CALL: std::time::Duration = std::time::Duration::from_millis(100);

/// Chunks embedded on the fly together: two, one a core (e5 runs one text
/// on one thread), so the time bound is overrun by one small batch at most,
/// and rarely: a batch predicted to overrun it is not started.
const ON_THE_FLY_BATCH: usize = 2;

fn vectors_key(meta: &Meta) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    for note in &meta.notes {
        for chunk in &note.chunks {
            hasher.update(chunk);
        }
    }
    *hasher.finalize().as_bytes()
}

/// Vectors just computed, or the stored file mapped read-only (the common
/// case: no copy, no decoding).
enum Vectors {
    Owned(Vec<f32>),
    Mapped(memmap2::Mmap),
    /// Int8 records (see [`VectorFormat::Int8`]), in memory or mapped.
    Int8Owned(Vec<u8>),
    Int8Mapped(memmap2::Mmap),
}

/// How the vectors are stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VectorFormat {
    /// Little-endian f32, `dims` per chunk.
    #[default]
    F32,
    /// Per chunk a little-endian f32 scale then `dims` signed bytes, the
    /// vector divided by its scale (largest magnitude / 127) and rounded:
    /// a quarter of the size, and dot products within about 1% of f32.
    Int8,
}

impl VectorFormat {
    fn extension(self) -> &'static str {
        match self {
            VectorFormat::F32 => "f32",
            VectorFormat::Int8 => "i8",
        }
    }

    fn record_bytes(self, dims: usize) -> usize {
        match self {
            VectorFormat::F32 => dims * 4,
            VectorFormat::Int8 => 4 + dims,
        }
    }
}

impl Vectors {
    fn format(&self) -> VectorFormat {
        match self {
            Vectors::Owned(_) | Vectors::Mapped(_) => VectorFormat::F32,
            Vectors::Int8Owned(_) | Vectors::Int8Mapped(_) => VectorFormat::Int8,
        }
    }

    /// The f32 values, for the f32 formats.
    fn floats(&self) -> Option<&[f32]> {
        match self {
            Vectors::Owned(v) => Some(v),
            // The file is written little-endian and mapped page-aligned.
            Vectors::Mapped(map) => Some(bytemuck::cast_slice(map)),
            _ => None,
        }
    }

    fn int8_bytes(&self) -> Option<&[u8]> {
        match self {
            Vectors::Int8Owned(bytes) => Some(bytes),
            Vectors::Int8Mapped(map) => Some(map),
            _ => None,
        }
    }

    /// The dot product of chunk `chunk` with `query`.
    fn dot(&self, chunk: usize, query: &[f32]) -> f32 {
        let dims = query.len();
        match self.floats() {
            Some(floats) => crate::embed::dot(&floats[chunk * dims..(chunk + 1) * dims], query),
            None => {
                let bytes = self.int8_bytes().unwrap_or_default();
                let record = &bytes[chunk * (4 + dims)..(chunk + 1) * (4 + dims)];
                let scale = f32::from_le_bytes([record[0], record[1], record[2], record[3]]);
                let sum: f32 = record[4..]
                    .iter()
                    .zip(query)
                    .map(|(&code, q)| code as i8 as f32 * q)
                    .sum();
                sum * scale
            }
        }
    }

    /// Chunk `chunk` as f32 (decoded from int8 when stored so).
    fn vector(&self, chunk: usize, dims: usize) -> Option<Vec<f32>> {
        match self.floats() {
            Some(floats) => floats
                .get(chunk * dims..(chunk + 1) * dims)
                .map(<[f32]>::to_vec),
            None => {
                let bytes = self.int8_bytes()?;
                let record = bytes.get(chunk * (4 + dims)..(chunk + 1) * (4 + dims))?;
                let scale = f32::from_le_bytes([record[0], record[1], record[2], record[3]]);
                Some(
                    record[4..]
                        .iter()
                        .map(|&c| c as i8 as f32 * scale)
                        .collect(),
                )
            }
        }
    }

    /// Every chunk as f32, in order.
    fn all_floats(&self, chunks: usize, dims: usize) -> Vec<f32> {
        match self.floats() {
            Some(floats) => floats.to_vec(),
            None => (0..chunks)
                .flat_map(|i| self.vector(i, dims).unwrap_or_default())
                .collect(),
        }
    }
}

/// The int8 records of `vectors` (`dims` floats per chunk).
fn quantize(vectors: &[f32], dims: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(vectors.len() / dims.max(1) * (4 + dims));
    for vector in vectors.chunks_exact(dims.max(1)) {
        let largest = vector.iter().fold(0.0_f32, |m, x| m.max(x.abs()));
        let scale = if largest > 0.0 { largest / 127.0 } else { 1.0 };
        out.extend_from_slice(&scale.to_le_bytes());
        out.extend(
            vector
                .iter()
                .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8 as u8),
        );
    }
    out
}

fn meta_file(dir: &Path, fingerprint: &str) -> PathBuf {
    dir.join(format!("vectors-{fingerprint}.meta"))
}

fn data_file(dir: &Path, fingerprint: &str, format: VectorFormat) -> PathBuf {
    dir.join(format!("vectors-{fingerprint}.{}", format.extension()))
}

/// Chunks embedded per batch: each batch is journaled, and the progress
/// bar moves by one batch (a few seconds of a transformer's work).
const EMBED_BATCH: usize = 64;

/// Embeds `to_embed` in batches, appending each to the model's journal, so
/// that a run killed after hours keeps what it embedded, reporting each
/// batch to `progress`. A model that fails (a served one, down) ends the
/// run with what was journaled kept for the next.
fn embed_journaled(
    dir: &Path,
    fingerprint: &str,
    embedder: &dyn Embedder,
    to_embed: &[(&[u8; 16], &str)],
    (mut done, total): (usize, usize),
    progress: &Progress,
) -> Result<Vec<Vec<f32>>> {
    if to_embed.is_empty() {
        return Ok(Vec::new());
    }
    let stage = Stage::Embedding;
    progress.report(Event::Started {
        stage,
        total: to_embed.len() as u64,
    });
    let mut journal = vector_journal::Journal::open(dir, fingerprint, embedder.dims());
    let mut fresh = Vec::with_capacity(to_embed.len());
    let mut last_written = std::time::Instant::now();
    for batch in to_embed.chunks(EMBED_BATCH) {
        let texts: Vec<&str> = batch.iter().map(|(_, text)| *text).collect();
        let vectors = match embedder.try_embed_many(&texts) {
            Ok(vectors) => vectors,
            Err(why) => {
                progress.report(Event::Finished { stage });
                bail!("{why}");
            }
        };
        let records: Vec<(&[u8; 16], &[f32])> = batch
            .iter()
            .zip(&vectors)
            .map(|((hash, _), vector)| (*hash, vector.as_slice()))
            .collect();
        journal.append(&records);
        done += batch.len();
        // Once a second at most: each write is a file and folder fsync.
        if last_written.elapsed() >= std::time::Duration::from_secs(1) {
            write_progress(dir, fingerprint, done.min(total), total);
            last_written = std::time::Instant::now();
        }
        progress.report(Event::Advanced {
            stage,
            count: batch.len() as u64,
        });
        fresh.extend(vectors);
    }
    progress.report(Event::Finished { stage });
    Ok(fresh)
}

fn chunk_hash(text: &str) -> [u8; 16] {
    let hash = blake3::hash(text.as_bytes());
    let mut out = [0u8; 16];
    out.copy_from_slice(&hash.as_bytes()[..16]);
    out
}

impl SemanticIndex {
    /// Brings the vectors in `dir` up to date with `vault` (whose file
    /// hashes `catalog` holds) for `embedder`, embedding only chunks whose
    /// text is new, and returns them aligned with the vault's notes.
    pub fn sync(
        dir: &Path,
        vault: &Vault,
        catalog: &Catalog,
        embedder: &dyn Embedder,
        format: Option<VectorFormat>,
        progress: &Progress,
    ) -> Result<SemanticIndex> {
        let fingerprint = embedder.fingerprint().to_string();
        let dims = embedder.dims();
        let (old_meta, old_vectors) = read(dir, &fingerprint, dims).unwrap_or_default();
        let stored_format = old_vectors.format();
        let format = format.unwrap_or(stored_format);
        if let Some(spans) = unchanged_spans(&old_meta, vault, catalog)
            && old_vectors.format() == format
        {
            let chunks = spans.last().map_or(0, |s| s.end);
            return Ok(SemanticIndex {
                dims,
                spans,
                vectors: old_vectors,
                embedded: 0,
                chunks,
                key: vectors_key(&old_meta),
                fingerprint,
                ann: None,
                pending: None,
            });
        }
        let old_count: usize = old_meta.notes.iter().map(|n| n.chunks.len()).sum();
        let old_vectors = old_vectors.all_floats(old_count, dims);
        // What a killed run embedded counts as cached, like the stored vectors.
        let journaled = vector_journal::read(dir, &fingerprint, dims);
        let (old_by_path, cached) = cached_vectors(&old_meta, &old_vectors, &journaled, dims);
        // Notes whose file changed are re-chunked (in parallel); the others
        // keep their chunk list.
        let plans: Vec<(Vec<[u8; 16]>, Vec<String>)> = (0..vault.metas.len())
            .into_par_iter()
            .map(|i| {
                let path = &vault.metas[i].path;
                let content = catalog.file(path).map(|f| f.hash).unwrap_or([0; 32]);
                if let Some((_, old)) = old_by_path.get(path.as_str())
                    && old.content == content
                    && old.chunks.iter().all(|h| cached.contains_key(h))
                {
                    return (old.chunks.clone(), Vec::new());
                }
                let texts = chunk_texts(&vault.note(i));
                (texts.iter().map(|t| chunk_hash(t)).collect(), texts)
            })
            .collect();
        let mut to_embed: Vec<(&[u8; 16], &str)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (hashes, texts) in &plans {
            for (hash, text) in hashes.iter().zip(texts) {
                if !cached.contains_key(hash) && seen.insert(*hash) {
                    to_embed.push((hash, text));
                }
            }
        }
        let total: usize = plans.iter().map(|(h, _)| h.len()).sum();
        let lacking = plans
            .iter()
            .flat_map(|(h, _)| h)
            .filter(|h| !cached.contains_key(*h))
            .count();
        let counts = (total - lacking, total);
        if !to_embed.is_empty() {
            // A run stopped midway leaves its journal; the plan lets a
            // partial open find every journalled vector without chunking.
            let notes = plans
                .iter()
                .enumerate()
                .map(|(i, (hashes, _))| {
                    let path = &vault.metas[i].path;
                    NoteChunks {
                        path: path.clone(),
                        content: catalog.file(path).map(|f| f.hash).unwrap_or([0; 32]),
                        chunks: hashes.clone(),
                    }
                })
                .collect();
            write_plan(dir, embedder, notes);
        }
        let fresh = embed_journaled(dir, &fingerprint, embedder, &to_embed, counts, progress)?;
        let mut fresh_by_hash: HashMap<[u8; 16], &[f32]> = HashMap::new();
        for ((hash, _), vector) in to_embed.iter().zip(&fresh) {
            fresh_by_hash.insert(**hash, vector);
        }
        let mut vectors = Vec::with_capacity(total * dims);
        let mut spans = Vec::with_capacity(plans.len());
        let mut notes = Vec::with_capacity(plans.len());
        for (i, (hashes, _)) in plans.iter().enumerate() {
            let start = vectors.len() / dims;
            for hash in hashes {
                let vector = cached
                    .get(hash)
                    .or_else(|| fresh_by_hash.get(hash))
                    .context("a chunk lost its vector")?;
                vectors.extend_from_slice(vector);
            }
            spans.push(start..start + hashes.len());
            let path = &vault.metas[i].path;
            notes.push(NoteChunks {
                path: path.clone(),
                content: catalog.file(path).map(|f| f.hash).unwrap_or([0; 32]),
                chunks: hashes.clone(),
            });
        }
        let meta = Meta {
            model: embedder.name().to_string(),
            fingerprint: fingerprint.clone(),
            dims: dims as u32,
            notes,
        };
        let changed = !to_embed.is_empty() || old_meta.notes.len() != meta.notes.len() || {
            old_meta
                .notes
                .iter()
                .zip(&meta.notes)
                .any(|(a, b)| a.path != b.path || a.content != b.content)
        };
        let vectors = match format {
            VectorFormat::F32 => Vectors::Owned(vectors),
            VectorFormat::Int8 => Vectors::Int8Owned(quantize(&vectors, dims)),
        };
        if changed || stored_format != format {
            write(dir, &meta, &vectors)?;
        }
        vector_journal::remove(dir, &fingerprint);
        let _ = fs::remove_file(progress_file(dir, &fingerprint));
        let _ = fs::remove_file(plan_file(dir, &fingerprint));
        Ok(SemanticIndex {
            dims,
            spans,
            vectors,
            embedded: to_embed.len(),
            chunks: total,
            key: vectors_key(&meta),
            fingerprint,
            ann: None,
            pending: None,
        })
    }

    /// Opens the vectors for `vault` without holding the caller up: when
    /// at most [`OPEN_CHUNKS`] chunks lack a vector (or `mode` is
    /// [`EmbedMode::Complete`]) this is [`SemanticIndex::sync`]; otherwise
    /// nothing is embedded and the index searches the chunks that have a
    /// vector (stored, or journalled by a run still under way or stopped),
    /// a note scoring as its best embedded chunk. The rest waits for
    /// [`SemanticIndex::embed_notes`] (the notes a query asks about) and a
    /// complete sync (`ctxpack index`, `serve`, a watcher).
    pub fn open_bounded(
        dir: &Path,
        vault: &Vault,
        catalog: &Catalog,
        embedder: &dyn Embedder,
        format: Option<VectorFormat>,
        mode: EmbedMode,
        progress: &Progress,
    ) -> Result<SemanticIndex> {
        if mode == EmbedMode::Complete {
            return SemanticIndex::sync(dir, vault, catalog, embedder, format, progress);
        }
        // Someone is waiting: the few chunks embedded now get the query's
        // bound, whatever a served model's own timeout and retries.
        let waiting = crate::embed::Within {
            inner: embedder,
            deadline: crate::embed::remote::query_deadline(),
        };
        let sync = || SemanticIndex::sync(dir, vault, catalog, &waiting, format, progress);
        let fingerprint = embedder.fingerprint().to_string();
        let dims = embedder.dims();
        let (old_meta, old_vectors) = read(dir, &fingerprint, dims).unwrap_or_default();
        if unchanged_spans(&old_meta, vault, catalog).is_some() {
            return sync();
        }
        let old_count: usize = old_meta.notes.iter().map(|n| n.chunks.len()).sum();
        let old_floats = old_vectors.all_floats(old_count, dims);
        let journaled = vector_journal::read(dir, &fingerprint, dims);
        let (old_by_path, cached) = cached_vectors(&old_meta, &old_floats, &journaled, dims);
        // The chunk lists a partial open made last time, so that each call
        // while the vault is being embedded does not chunk every note again.
        let plan: Meta = fs::read(plan_file(dir, &fingerprint))
            .ok()
            .and_then(|bytes| postcard::from_bytes(&bytes).ok())
            .filter(|plan: &Meta| plan.dims as usize == dims)
            .unwrap_or_default();
        let planned: HashMap<&str, &NoteChunks> =
            plan.notes.iter().map(|n| (n.path.as_str(), n)).collect();
        let hashes = note_hashes(vault, catalog, &old_by_path, &cached, &planned);
        let notes: Vec<NoteChunks> = hashes
            .iter()
            .enumerate()
            .filter_map(|(i, chunks)| {
                let path = &vault.metas[i].path;
                Some(NoteChunks {
                    path: path.clone(),
                    content: catalog.file(path).map(|f| f.hash).unwrap_or([0; 32]),
                    chunks: chunks.clone()?,
                })
            })
            .collect();
        let same_plan =
            plan.notes.len() == notes.len()
                && plan.notes.iter().zip(&notes).all(|(a, b)| {
                    a.path == b.path && a.content == b.content && a.chunks == b.chunks
                });
        if !same_plan {
            write_plan(dir, embedder, notes);
        }
        let unplanned = hashes.iter().filter(|h| h.is_none()).count();
        let mut missing_unique = std::collections::HashSet::new();
        for hash in hashes.iter().flatten().flatten() {
            if !cached.contains_key(hash) {
                missing_unique.insert(*hash);
                if missing_unique.len() > OPEN_CHUNKS {
                    break;
                }
            }
        }
        if unplanned == 0 && missing_unique.len() <= OPEN_CHUNKS {
            return sync();
        }
        let planned_chunks: usize = hashes.iter().flatten().map(Vec::len).sum();
        // Notes never chunked are counted at the index's mean: a note's
        // title chunk plus its sections.
        let notes_count = vault.metas.len().max(1);
        let per_note = (catalog.sections as f64 + notes_count as f64) / notes_count as f64;
        let total = planned_chunks + (unplanned as f64 * per_note).round() as usize;
        let mut vectors = Vec::new();
        let mut spans = Vec::with_capacity(hashes.len());
        let mut missing = Vec::with_capacity(hashes.len());
        let mut present = Vec::with_capacity(hashes.len());
        for note in &hashes {
            let start = vectors.len() / dims.max(1);
            let (mut here, mut lacking) = (Vec::new(), None);
            if let Some(note) = note {
                let mut lacks = Vec::new();
                for hash in note {
                    match cached.get(hash) {
                        Some(vector) => {
                            vectors.extend_from_slice(vector);
                            here.push(*hash);
                        }
                        None => lacks.push(*hash),
                    }
                }
                lacking = Some(lacks);
            }
            spans.push(start..start + here.len());
            present.push(here);
            missing.push(lacking);
        }
        let estimated = unplanned > 0;
        drop(cached);
        let index = SemanticIndex {
            dims,
            spans,
            vectors: Vectors::Owned(vectors),
            embedded: 0,
            chunks: total,
            key: [0; 32],
            fingerprint,
            ann: None,
            pending: Some(Pending {
                dir: dir.to_path_buf(),
                missing,
                present,
                journaled,
                estimated,
                late: Default::default(),
            }),
        };
        write_progress(dir, &index.fingerprint, index.done_chunks(), total);
        Ok(index)
    }

    /// Whether the chunk count is an estimate: some notes were not chunked
    /// yet (a large vault never embedded).
    pub fn is_estimated(&self) -> bool {
        self.pending.as_ref().is_some_and(|p| p.estimated)
    }

    /// Whether some chunks still lack a vector.
    pub fn is_partial(&self) -> bool {
        self.pending.is_some()
    }

    /// How many chunks have a vector (stored, journalled or embedded on
    /// the fly by this process).
    pub fn done_chunks(&self) -> usize {
        match &self.pending {
            None => self.chunks,
            Some(pending) => {
                let late = pending.late.read().map_or(0, |late| late.chunks);
                self.spans.last().map_or(0, |s| s.end) + late
            }
        }
    }

    /// Embeds the chunks the notes `notes` (most wanted first) still lack,
    /// within `bound`, journals them (the next sync takes them as cached)
    /// and searches them from now on. Returns how many were embedded.
    pub fn embed_notes(
        &self,
        vault: &Vault,
        embedder: &dyn Embedder,
        notes: &[usize],
        bound: &OnTheFly,
    ) -> usize {
        let Some(pending) = &self.pending else {
            return 0;
        };
        let started = std::time::Instant::now();
        let mut todo: Vec<(usize, [u8; 16], String)> = Vec::new();
        let mut found: Vec<(usize, [u8; 16], Vec<f32>)> = Vec::new();
        {
            let Ok(late) = pending.late.read() else {
                return 0;
            };
            for &note in notes {
                if todo.len() >= bound.chunks {
                    break;
                }
                let Some(lacking) = pending.missing.get(note) else {
                    continue;
                };
                if lacking
                    .as_ref()
                    .is_some_and(|l| l.iter().all(|h| late.hashes.contains(h)))
                {
                    continue;
                }
                for text in chunk_texts(&vault.note(note)) {
                    let hash = chunk_hash(&text);
                    // A note not chunked before lacks every chunk it has
                    // no vector for; the journal may hold some.
                    let lacks = match lacking {
                        Some(lacking) => lacking.contains(&hash),
                        None => !pending.present[note].contains(&hash),
                    };
                    if lacks && !late.hashes.contains(&hash) {
                        if let Some(vector) = pending.journaled.get(&hash) {
                            found.push((note, hash, vector.clone()));
                        } else if todo.len() < bound.chunks
                            && !todo.iter().any(|(_, h, _)| *h == hash)
                        {
                            todo.push((note, hash, text));
                        }
                    }
                }
            }
        }
        let mut done = 0;
        if let Ok(mut late) = pending.late.write() {
            for (note, hash, vector) in found {
                if late.hashes.insert(hash) {
                    late.vectors.entry(note).or_default().push((hash, vector));
                    late.chunks += 1;
                    done += 1;
                }
            }
        }
        let mut journal = None;
        // The model's time per character so far: a batch predicted to end
        // past the bound is not started (one batch of four long chunks took
        // e5 0.5 s, most of a first search's second).
        let (mut spent, mut chars) = (std::time::Duration::ZERO, 0usize);
        for batch in todo.chunks(ON_THE_FLY_BATCH) {
            let elapsed = started.elapsed();
            let batch_chars: usize = batch.iter().map(|(_, _, text)| text.len()).sum();
            let predicted = match chars {
                0 => std::time::Duration::ZERO,
                _ => spent.mul_f64(batch_chars as f64 / chars as f64),
            };
            if elapsed + predicted >= bound.time {
                break;
            }
            let texts: Vec<&str> = batch.iter().map(|(_, _, text)| text.as_str()).collect();
            let began = std::time::Instant::now();
            // A model that fails (a remote server down) leaves the rest
            // not yet embedded: zero vectors must never be journalled.
            let left = bound.time.saturating_sub(started.elapsed());
            let Ok(vectors) = embedder.try_embed_many_within(&texts, left.max(MIN_CALL)) else {
                break;
            };
            spent += began.elapsed();
            chars += batch_chars;
            let records: Vec<(&[u8; 16], &[f32])> = batch
                .iter()
                .zip(&vectors)
                .map(|((_, hash, _), vector)| (hash, vector.as_slice()))
                .collect();
            journal
                .get_or_insert_with(|| {
                    vector_journal::Journal::open_append(&pending.dir, &self.fingerprint, self.dims)
                })
                .append(&records);
            let Ok(mut late) = pending.late.write() else {
                break;
            };
            for ((note, hash, _), vector) in batch.iter().zip(&vectors) {
                if vector.len() == self.dims && late.hashes.insert(*hash) {
                    late.vectors
                        .entry(*note)
                        .or_default()
                        .push((*hash, vector.clone()));
                    late.chunks += 1;
                    done += 1;
                }
            }
        }
        if done > 0 {
            write_progress(
                &pending.dir,
                &self.fingerprint,
                self.done_chunks(),
                self.chunks,
            );
        }
        done
    }

    /// The vectors of `texts`, the chunks of note `note` as
    /// [`chunk_texts`] gives them now, where they have one (stored,
    /// journalled or embedded on the fly).
    pub fn chunk_vectors(&self, note: usize, texts: &[String]) -> Vec<Option<Vec<f32>>> {
        let Some(span) = self.spans.get(note) else {
            return vec![None; texts.len()];
        };
        let Some(pending) = &self.pending else {
            // Complete: the span holds exactly the note's chunks, in order.
            if span.len() != texts.len() {
                return vec![None; texts.len()];
            }
            return span
                .clone()
                .map(|chunk| self.vectors.vector(chunk, self.dims))
                .collect();
        };
        let late = pending.late.read().ok();
        let late = late.as_ref().and_then(|l| l.vectors.get(&note));
        texts
            .iter()
            .map(|text| {
                let hash = chunk_hash(text);
                if let Some(at) = pending.present[note].iter().position(|h| *h == hash) {
                    return self.vectors.vector(span.start + at, self.dims);
                }
                late?
                    .iter()
                    .find(|(h, _)| *h == hash)
                    .map(|(_, v)| v.clone())
            })
            .collect()
    }

    /// Opens (or builds and stores in `dir`) the HNSW graph when `choice`
    /// asks for it; returns whether searches now use it.
    pub fn use_ann(&mut self, dir: &Path, choice: AnnChoice) -> Result<bool> {
        // The graph is of every chunk's vector; a partial index scans.
        if self.pending.is_some() {
            return Ok(false);
        }
        let large = self.chunks >= ANN_THRESHOLD;
        let (wanted, may_build) = match choice {
            AnnChoice::Always => (self.chunks > 0, true),
            AnnChoice::Build => (large, true),
            AnnChoice::Auto => (large, false),
            AnnChoice::Never => (false, false),
        };
        if wanted && self.ann.is_none() && !may_build {
            self.ann = AnnIndex::open(dir, &self.fingerprint, self.key);
        } else if wanted && self.ann.is_none() {
            self.ann = Some(AnnIndex::open_or_build(
                dir,
                &self.fingerprint,
                self.key,
                &self.vectors.all_floats(self.chunks, self.dims),
                self.dims,
            )?);
        }
        Ok(self.ann.is_some())
    }

    /// Whether the last [`SemanticIndex::use_ann`] built the graph.
    pub fn ann_built(&self) -> bool {
        self.ann.as_ref().is_some_and(|a| a.built)
    }

    /// The note a chunk belongs to.
    fn note_of(&self, chunk: usize) -> usize {
        self.spans.partition_point(|span| span.end <= chunk)
    }

    /// Like [`SemanticIndex::search`], through the HNSW graph; `None` when
    /// there is no graph, or when it found fewer notes than `keep` lets
    /// through of a full scan's worth (a narrow filter), so the caller
    /// scans instead.
    fn search_ann(
        &self,
        query: &[f32],
        limit: usize,
        keep: &dyn Fn(usize) -> bool,
    ) -> Option<Vec<(usize, f32)>> {
        let ann = self.ann.as_ref()?;
        let mut best: HashMap<usize, f32> = HashMap::new();
        for (chunk, similarity) in ann.search(query) {
            let note = self.note_of(chunk);
            if keep(note) {
                let entry = best.entry(note).or_insert(f32::NEG_INFINITY);
                *entry = entry.max(similarity);
            }
        }
        let reachable = self.spans.iter().filter(|span| !span.is_empty()).count();
        if best.len() < limit.min(MIN_ANN_NOTES).min(reachable) {
            return None;
        }
        let mut scored: Vec<(usize, f32)> = best.into_iter().collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(limit);
        Some(scored)
    }

    /// Notes by their best chunk's similarity to `query`, best first (ties
    /// by note order), at most `limit`, among those `keep` accepts.
    pub fn search(
        &self,
        query: &[f32],
        limit: usize,
        keep: &dyn Fn(usize) -> bool,
    ) -> Vec<(usize, f32)> {
        if query.len() != self.dims || query.iter().all(|x| *x == 0.0) {
            return Vec::new();
        }
        if let Some(found) = self.search_ann(query, limit, keep) {
            return found;
        }
        let late = self.pending.as_ref().and_then(|p| p.late.read().ok());
        let late_vectors = |note: usize| late.as_ref().and_then(|l| l.vectors.get(&note));
        let mut scored: Vec<(usize, f32)> = self
            .spans
            .iter()
            .enumerate()
            .filter(|(note, span)| {
                (!span.is_empty() || late_vectors(*note).is_some()) && keep(*note)
            })
            .map(|(note, span)| {
                let best = span
                    .clone()
                    .map(|chunk| self.vectors.dot(chunk, query))
                    .chain(
                        late_vectors(note)
                            .into_iter()
                            .flatten()
                            .map(|(_, v)| crate::embed::dot(v, query)),
                    )
                    .fold(f32::NEG_INFINITY, f32::max);
                (note, best)
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(limit);
        scored
    }
}

type ByPath<'a> = HashMap<&'a str, (usize, &'a NoteChunks)>;

/// The stored notes by path (with their first chunk's place), and every
/// vector at hand by chunk hash: the stored ones and those a killed or
/// still running embedding journalled.
fn cached_vectors<'a>(
    old_meta: &'a Meta,
    old_floats: &'a [f32],
    journaled: &'a HashMap<[u8; 16], Vec<f32>>,
    dims: usize,
) -> (ByPath<'a>, HashMap<[u8; 16], &'a [f32]>) {
    let mut offset = 0;
    let old_by_path: ByPath<'a> = old_meta
        .notes
        .iter()
        .map(|n| {
            let start = offset;
            offset += n.chunks.len();
            (n.path.as_str(), (start, n))
        })
        .collect();
    let mut cached: HashMap<[u8; 16], &[f32]> = journaled
        .iter()
        .map(|(hash, vector)| (*hash, vector.as_slice()))
        .collect();
    for (start, note) in old_by_path.values() {
        for (i, hash) in note.chunks.iter().enumerate() {
            let at = (start + i) * dims;
            if let Some(v) = old_floats.get(at..at + dims) {
                cached.insert(*hash, v);
            }
        }
    }
    (old_by_path, cached)
}

/// Each note's chunk hashes: the stored list for a note whose file is
/// unchanged and whose chunks all have a vector, else chunked again (in
/// parallel).
fn note_hashes(
    vault: &Vault,
    catalog: &Catalog,
    old_by_path: &ByPath<'_>,
    cached: &HashMap<[u8; 16], &[f32]>,
    planned: &HashMap<&str, &NoteChunks>,
) -> Vec<Option<Vec<[u8; 16]>>> {
    let known = |i: usize| -> Option<Vec<[u8; 16]>> {
        let path = &vault.metas[i].path;
        let content = catalog.file(path).map(|f| f.hash).unwrap_or([0; 32]);
        if let Some((_, old)) = old_by_path.get(path.as_str())
            && old.content == content
            && old.chunks.iter().all(|h| cached.contains_key(h))
        {
            return Some(old.chunks.clone());
        }
        planned
            .get(path.as_str())
            .filter(|plan| plan.content == content)
            .map(|plan| plan.chunks.clone())
    };
    let mut hashes: Vec<Option<Vec<[u8; 16]>>> =
        (0..vault.metas.len()).into_par_iter().map(known).collect();
    let unknown: Vec<usize> = (0..hashes.len()).filter(|&i| hashes[i].is_none()).collect();
    // Chunking reads and parses each note: seconds for a large vault. An
    // edit or a small vault is chunked now; many notes never chunked wait
    // for a query that asks about them, or for the complete sync.
    if unknown.len() <= UNPLANNED_NOTES {
        let made: Vec<Vec<[u8; 16]>> = unknown
            .par_iter()
            .map(|&i| {
                chunk_texts(&vault.note(i))
                    .iter()
                    .map(|t| chunk_hash(t))
                    .collect()
            })
            .collect();
        for (i, made) in unknown.into_iter().zip(made) {
            hashes[i] = Some(made);
        }
    }
    hashes
}

/// At most this many notes whose chunks are unknown (never chunked, or
/// edited) are chunked when vectors are opened without waiting.
const UNPLANNED_NOTES: usize = 256;

/// Keeps the chunk lists of `notes` for the next partial open (best
/// effort: without it, notes are chunked again).
fn write_plan(dir: &Path, embedder: &dyn Embedder, notes: Vec<NoteChunks>) {
    let plan = Meta {
        model: embedder.name().to_string(),
        fingerprint: embedder.fingerprint().to_string(),
        dims: embedder.dims() as u32,
        notes,
    };
    if let Ok(bytes) = postcard::to_allocvec(&plan) {
        let _ = write_atomic(&plan_file(dir, &plan.fingerprint), &bytes);
    }
}

fn plan_file(dir: &Path, fingerprint: &str) -> PathBuf {
    dir.join(format!("vectors-{fingerprint}.plan"))
}

fn progress_file(dir: &Path, fingerprint: &str) -> PathBuf {
    dir.join(format!("vectors-{fingerprint}.progress"))
}

/// Records how far a model's embedding of the vault has got, for `status`
/// (which loads no model). Best effort: a status without it says less.
fn write_progress(dir: &Path, fingerprint: &str, done: usize, total: usize) {
    let _ = write_atomic(
        &progress_file(dir, fingerprint),
        format!("{done} {total}\n").as_bytes(),
    );
}

/// Whether the vault's vectors of the model of `fingerprint` were written
/// whole (by the last update that embedded every chunk).
pub(crate) fn embedding_finished(dir: &Path, fingerprint: &str) -> bool {
    embedding_progress(dir, fingerprint).is_none() && meta_file(dir, fingerprint).is_file()
}

/// How far the embedding of the vault with the model of `fingerprint` got
/// when last seen: (chunks with a vector, chunks), or `None` when it was
/// finished or never started.
pub(crate) fn embedding_progress(dir: &Path, fingerprint: &str) -> Option<(usize, usize)> {
    let text = fs::read_to_string(progress_file(dir, fingerprint)).ok()?;
    let (done, total) = text.trim().split_once(' ')?;
    Some((done.parse().ok()?, total.parse().ok()?))
}

impl crate::store::VectorSearch for std::sync::Arc<SemanticIndex> {
    fn search(
        &self,
        query: &[f32],
        limit: usize,
        keep: &dyn Fn(usize) -> bool,
    ) -> Vec<(usize, f32)> {
        SemanticIndex::search(self, query, limit, keep)
    }
}

/// The chunk spans of the stored vectors when they were made from exactly
/// the vault's notes as they are now (the common case: nothing to do).
fn unchanged_spans(
    meta: &Meta,
    vault: &Vault,
    catalog: &Catalog,
) -> Option<Vec<std::ops::Range<usize>>> {
    if meta.notes.len() != vault.metas.len() {
        return None;
    }
    let mut spans = Vec::with_capacity(meta.notes.len());
    let mut offset = 0;
    for (stored, note) in meta.notes.iter().zip(vault.metas.iter()) {
        if stored.path != note.path
            || catalog.file(&note.path).map(|f| f.hash) != Some(stored.content)
        {
            return None;
        }
        spans.push(offset..offset + stored.chunks.len());
        offset += stored.chunks.len();
    }
    Some(spans)
}

/// The stored meta and vectors, in whichever format they were written.
fn read(dir: &Path, fingerprint: &str, dims: usize) -> Result<(Meta, Vectors)> {
    let meta: Meta = postcard::from_bytes(&fs::read(meta_file(dir, fingerprint))?)?;
    let (format, file) = [VectorFormat::F32, VectorFormat::Int8]
        .into_iter()
        .find_map(|format| {
            fs::File::open(data_file(dir, fingerprint, format))
                .ok()
                .map(|file| (format, file))
        })
        .context("no vector file")?;
    // SAFETY: the file is only ever replaced by rename, never written in
    // place, so the mapping stays valid while it is used.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    let chunks: usize = meta.notes.iter().map(|n| n.chunks.len()).sum();
    if meta.dims as usize != dims
        || map.len() != chunks * format.record_bytes(dims)
        || !cfg!(target_endian = "little")
    {
        bail!("vector files disagree; rebuilding");
    }
    let vectors = match (format, map.is_empty()) {
        (VectorFormat::F32, true) => Vectors::Owned(Vec::new()),
        (VectorFormat::F32, false) => Vectors::Mapped(map),
        (VectorFormat::Int8, true) => Vectors::Int8Owned(Vec::new()),
        (VectorFormat::Int8, false) => Vectors::Int8Mapped(map),
    };
    Ok((meta, vectors))
}

impl Default for Vectors {
    fn default() -> Vectors {
        Vectors::Owned(Vec::new())
    }
}

/// Writes the vectors in their format, then the meta, then removes a file
/// of the other format.
fn write(dir: &Path, meta: &Meta, vectors: &Vectors) -> Result<()> {
    fs::create_dir_all(dir)?;
    let format = vectors.format();
    let bytes: Vec<u8> = match vectors.floats() {
        Some(floats) => floats.iter().flat_map(|v| v.to_le_bytes()).collect(),
        None => vectors.int8_bytes().unwrap_or_default().to_vec(),
    };
    write_atomic(&data_file(dir, &meta.fingerprint, format), &bytes)?;
    write_atomic(
        &meta_file(dir, &meta.fingerprint),
        &postcard::to_allocvec(meta)?,
    )?;
    for other in [VectorFormat::F32, VectorFormat::Int8] {
        if other != format {
            let _ = fs::remove_file(data_file(dir, &meta.fingerprint, other));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{CHUNK_CHARS, MAX_NOTE_CHUNKS, pieces};
    use crate::embed::static_model::tests::tiny_model_files;
    use crate::index::{IndexConfig, VaultIndex};

    fn chunks_of(text: &str) -> Vec<String> {
        chunk_texts(&crate::parse::parse_note("notes/raft.md", text, None).0)
    }

    #[test]
    fn a_chunk_says_the_title_and_heading_path_once() {
        let chunks = chunks_of(
            "---\ntitle: Raft\ntags: [consensus]\n---\n# Raft\n\nLeaders replicate logs.\n\n## Election\n\nTerms grow.\n\n### Votes\n\nOne per term.\n",
        );
        assert_eq!(
            chunks,
            [
                "Raft · consensus\nLeaders replicate logs.",
                "Raft\nLeaders replicate logs.",
                "Raft > Election\nTerms grow.",
                "Raft > Election > Votes\nOne per term.",
            ]
        );
        // A first heading other than the title stays in the path; a heading
        // with nothing under it is embedded unless a deeper one follows. With
        // no lead and no sentence under a section, the sections' names are
        // the note's summary.
        let chunks = chunks_of("# Consensus\n\n## Open\n\n## Log\n\n### Entries\n\nappended\n");
        assert_eq!(chunks_of("# Raft\n\nOne line.\n"), ["raft\nOne line."]);
        assert_eq!(
            chunks,
            [
                "raft · Consensus\nSections: Open · Log",
                "raft > Consensus > Open",
                "raft > Consensus > Log > Entries\nappended",
            ]
        );
    }

    #[test]
    fn a_long_section_is_embedded_whole_in_pieces_under_its_path() {
        let sentence = "The leader appends the entry and replicates it. ";
        let text = format!("# Raft\n\n## Log\n\n{}\n", sentence.repeat(100));
        let chunks = chunks_of(&text);
        assert_eq!(chunks.len(), 4, "{chunks:?}");
        let mut joined = String::new();
        for chunk in &chunks[1..] {
            let piece = chunk.strip_prefix("raft > Log\n").expect(chunk);
            assert!(piece.chars().count() <= CHUNK_CHARS);
            assert!(
                piece.ends_with("replicates it."),
                "cut inside a sentence: {piece:?}"
            );
            joined.push_str(piece);
            joined.push(' ');
        }
        assert_eq!(joined, sentence.repeat(100));
        // A hostile note yields a bounded number of chunks.
        let huge = format!(
            "# Raft\n\n{}",
            "word ".repeat(CHUNK_CHARS * MAX_NOTE_CHUNKS)
        );
        assert_eq!(chunks_of(&huge).len(), MAX_NOTE_CHUNKS);
        let headings: String = (0..2 * MAX_NOTE_CHUNKS)
            .map(|i| format!("## H{i}\n\n"))
            .collect();
        assert_eq!(chunks_of(&headings).len(), MAX_NOTE_CHUNKS);
    }

    proptest::proptest! {
        #[test]
        fn pieces_cover_the_text_within_the_limit(
            text in "[a-c .。\n é]{0,400}",
            max_chars in 1usize..60,
        ) {
            let pieces = pieces(&text, max_chars);
            let squeeze = |s: &str| s.split_whitespace().collect::<String>();
            proptest::prop_assert_eq!(
                pieces.iter().map(|p| squeeze(p)).collect::<String>(),
                squeeze(&text)
            );
            for piece in &pieces {
                proptest::prop_assert!(!piece.is_empty() && piece.chars().count() <= max_chars);
                proptest::prop_assert_eq!(piece.trim(), *piece);
            }
        }
    }

    fn tiny_embedder(tmp: &Path) -> Box<dyn Embedder> {
        let folder = tmp.join("tiny");
        let (config, tensors, tokenizer) = tiny_model_files();
        fs::create_dir_all(&folder).unwrap();
        fs::write(folder.join("config.json"), config).unwrap();
        fs::write(folder.join("model.safetensors"), tensors).unwrap();
        fs::write(folder.join("tokenizer.json"), tokenizer).unwrap();
        crate::embed::import(&tmp.join("store"), &folder, None, false).unwrap();
        crate::embed::load(&tmp.join("store"), "tiny").unwrap()
    }

    #[test]
    fn only_changed_chunks_are_embedded_again() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        fs::create_dir_all(&root).unwrap();
        fs::write(
            root.join("a.md"),
            "# Raft\n\nraft leader\n\n## Log\n\nlogs\n",
        )
        .unwrap();
        // Titled by the field: the tiny model's ranking below rests on it.
        fs::write(
            root.join("b.md"),
            "---\ntitle: 共识\n---\n# 共识\n\n共识 领导\n",
        )
        .unwrap();
        let embedder = tiny_embedder(tmp.path());
        let dir = tmp.path().join("index");
        let (index, _) = VaultIndex::open(&root, &IndexConfig::new(dir.clone())).unwrap();
        let first = sync_as_stored(&dir, &index, embedder.as_ref());
        assert_eq!(first.embedded, first.chunks);
        assert!(first.chunks >= 4);
        let again = sync_as_stored(&dir, &index, embedder.as_ref());
        assert_eq!(again.embedded, 0, "nothing changed, nothing embedded");
        assert_eq!(again.vectors.floats(), first.vectors.floats());

        // Editing one section re-embeds that section only.
        fs::write(
            root.join("a.md"),
            "# Raft\n\nraft leader\n\n## Log\n\nlogs raft\n",
        )
        .unwrap();
        let (index, _) = VaultIndex::open(&root, &IndexConfig::new(dir.clone())).unwrap();
        let edited = sync_as_stored(&dir, &index, embedder.as_ref());
        assert_eq!(edited.embedded, 1);
        assert_eq!(edited.chunks, first.chunks);

        let query = embedder.embed("共识");
        let hits = edited.search(&query, 10, &|_| true);
        assert_eq!(index.vault().metas[hits[0].0].path, "b.md");
        assert!(
            edited
                .search(&query, 10, &|note| note != hits[0].0)
                .iter()
                .all(|h| h.0 != hits[0].0)
        );
    }

    /// An embedder that gives up (panics, as a kill would stop it) after
    /// `left` texts.
    struct GivesUp<'a> {
        inner: &'a dyn Embedder,
        left: std::sync::atomic::AtomicUsize,
    }

    impl Embedder for GivesUp<'_> {
        fn name(&self) -> &str {
            self.inner.name()
        }
        fn fingerprint(&self) -> &str {
            self.inner.fingerprint()
        }
        fn dims(&self) -> usize {
            self.inner.dims()
        }
        fn embed(&self, text: &str) -> Vec<f32> {
            let ordering = std::sync::atomic::Ordering::SeqCst;
            if self
                .left
                .fetch_update(ordering, ordering, |n| n.checked_sub(1))
                .is_err()
            {
                panic!("stopped");
            }
            self.inner.embed(text)
        }
    }

    #[test]
    fn a_run_stopped_midway_keeps_what_it_embedded() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        fs::create_dir_all(&root).unwrap();
        for i in 0..40 {
            let text =
                format!("# Note {i}\n\nword{i} raft\n\n## A\n\nleader {i}\n\n## B\n\nlog {i}\n");
            fs::write(root.join(format!("n{i:02}.md")), text).unwrap();
        }
        let embedder = tiny_embedder(tmp.path());
        let dir = tmp.path().join("index");
        let (index, _) = VaultIndex::open(&root, &IndexConfig::new(dir.clone())).unwrap();
        let vault = index.vault();
        let chunks: usize = (0..vault.metas.len())
            .map(|i| chunk_texts(&vault.note(i)).len())
            .sum();
        assert!(chunks > 2 * EMBED_BATCH, "{chunks} chunks");

        let stopping = GivesUp {
            inner: embedder.as_ref(),
            left: (EMBED_BATCH + 10).into(),
        };
        let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sync_as_stored(&dir, &index, &stopping)
        }));
        assert!(stopped.is_err());
        assert!(!meta_file(&dir, embedder.fingerprint()).exists());

        // The next run embeds only what the first had not finished, and
        // ends with the vectors a run that was never stopped writes.
        let resumed = sync_as_stored(&dir, &index, embedder.as_ref());
        assert_eq!(resumed.embedded, chunks - EMBED_BATCH);
        assert_eq!(resumed.chunks, chunks);
        assert!(vector_journal::read(&dir, embedder.fingerprint(), embedder.dims()).is_empty());
        let fresh_dir = tmp.path().join("fresh");
        let fresh = sync_as_stored(&fresh_dir, &index, embedder.as_ref());
        assert_eq!(fresh.embedded, chunks);
        assert_eq!(resumed.vectors.floats(), fresh.vectors.floats());
    }

    fn open_as_stored(
        dir: &Path,
        index: &VaultIndex,
        embedder: &dyn Embedder,
        mode: EmbedMode,
    ) -> SemanticIndex {
        SemanticIndex::open_bounded(
            dir,
            &index.vault(),
            &index.catalog,
            embedder,
            None,
            mode,
            &Progress::none(),
        )
        .unwrap()
    }

    #[test]
    fn a_large_vault_opens_partial_and_embeds_what_queries_ask_within_the_bound() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        fs::create_dir_all(&root).unwrap();
        for i in 0..40 {
            let text =
                format!("# Note {i}\n\nword{i} raft\n\n## A\n\nleader {i}\n\n## B\n\nlog {i}\n");
            fs::write(root.join(format!("n{i:02}.md")), text).unwrap();
        }
        let embedder = tiny_embedder(tmp.path());
        let fingerprint = embedder.fingerprint();
        let dir = tmp.path().join("index");
        let (index, _) = VaultIndex::open(&root, &IndexConfig::new(dir.clone())).unwrap();
        let vault = index.vault();
        let texts = |note: usize| chunk_texts(&vault.note(note));
        let total: usize = (0..vault.metas.len()).map(|i| texts(i).len()).sum();
        assert!(total > OPEN_CHUNKS, "{total} chunks");

        // Nothing embedded, nothing waited for; status can say so.
        let partial = open_as_stored(&dir, &index, embedder.as_ref(), EmbedMode::Bounded);
        assert!(partial.is_partial());
        assert_eq!((partial.embedded, partial.done_chunks()), (0, 0));
        assert_eq!(partial.chunks, total);
        assert_eq!(embedding_progress(&dir, fingerprint), Some((0, total)));
        assert!(plan_file(&dir, fingerprint).exists());
        let query = embedder.embed("leader raft");
        assert!(partial.search(&query, 10, &|_| true).is_empty());

        // No time left: nothing embedded.
        let no_time = OnTheFly {
            chunks: 64,
            time: std::time::Duration::ZERO,
        };
        assert_eq!(
            partial.embed_notes(&vault, embedder.as_ref(), &[3], &no_time),
            0
        );

        // Within the chunk bound, in the order asked: all of note 3's, then
        // the first of note 7's.
        let per_note = texts(3).len();
        let bound = OnTheFly {
            chunks: per_note + 1,
            time: std::time::Duration::from_secs(60),
        };
        let done = partial.embed_notes(&vault, embedder.as_ref(), &[3, 7], &bound);
        assert_eq!(done, per_note + 1);
        assert_eq!(partial.done_chunks(), per_note + 1);
        let mut found: Vec<usize> = partial
            .search(&query, 10, &|_| true)
            .iter()
            .map(|h| h.0)
            .collect();
        found.sort_unstable();
        assert_eq!(found, [3, 7]);
        assert_eq!(partial.search(&query, 10, &|note| note != 3).len(), 1);
        // Asked again: nothing left to embed for note 3.
        let again = OnTheFly {
            chunks: 64,
            time: std::time::Duration::from_secs(60),
        };
        assert_eq!(
            partial.embed_notes(&vault, embedder.as_ref(), &[3], &again),
            0
        );
        let vectors = partial.chunk_vectors(3, &texts(3));
        let expected: Vec<Option<Vec<f32>>> =
            texts(3).iter().map(|t| Some(embedder.embed(t))).collect();
        assert_eq!(vectors, expected);
        let seven = partial.chunk_vectors(7, &texts(7));
        assert_eq!(seven.iter().filter(|v| v.is_some()).count(), 1);

        // Journalled: another process opens with them, and searches alike.
        assert_eq!(
            vector_journal::read(&dir, fingerprint, embedder.dims()).len(),
            per_note + 1
        );
        let reopened = open_as_stored(&dir, &index, embedder.as_ref(), EmbedMode::Bounded);
        assert_eq!(reopened.done_chunks(), per_note + 1);
        assert_eq!(
            reopened.search(&query, 10, &|_| true),
            partial.search(&query, 10, &|_| true)
        );
        assert_eq!(reopened.chunk_vectors(3, &texts(3)), expected);
        assert_eq!(
            embedding_progress(&dir, fingerprint),
            Some((per_note + 1, total))
        );

        // Completed: only the rest is embedded, the progress file goes, and
        // the vectors are those of a run never interrupted.
        let complete = open_as_stored(&dir, &index, embedder.as_ref(), EmbedMode::Complete);
        assert!(!complete.is_partial());
        assert_eq!(complete.embedded, total - per_note - 1);
        assert_eq!(complete.done_chunks(), total);
        assert_eq!(embedding_progress(&dir, fingerprint), None);
        assert!(!plan_file(&dir, fingerprint).exists());
        assert_eq!(complete.chunk_vectors(3, &texts(3)), expected);
        let fresh = sync_as_stored(&tmp.path().join("fresh"), &index, embedder.as_ref());
        assert_eq!(complete.vectors.floats(), fresh.vectors.floats());
        // Then a bounded open is the stored vectors, complete.
        let later = open_as_stored(&dir, &index, embedder.as_ref(), EmbedMode::Bounded);
        assert!(!later.is_partial());
        assert_eq!(later.embedded, 0);
    }

    #[test]
    fn many_notes_never_chunked_wait_for_a_query_or_the_complete_sync() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        fs::create_dir_all(&root).unwrap();
        for i in 0..=UNPLANNED_NOTES {
            let text = format!("# Note {i}\n\nword{i} raft\n\n## A\n\nleader {i}\n");
            fs::write(root.join(format!("n{i:03}.md")), text).unwrap();
        }
        let embedder = tiny_embedder(tmp.path());
        let dir = tmp.path().join("index");
        let (index, _) = VaultIndex::open(&root, &IndexConfig::new(dir.clone())).unwrap();
        let vault = index.vault();
        let per_note = chunk_texts(&vault.note(5)).len();
        let exact: usize = (0..vault.metas.len())
            .map(|i| chunk_texts(&vault.note(i)).len())
            .sum();

        // Not one note chunked: the count is the index's estimate.
        let lazy = open_as_stored(&dir, &index, embedder.as_ref(), EmbedMode::Bounded);
        assert!(lazy.is_partial() && lazy.is_estimated());
        assert_eq!(
            lazy.chunks,
            (UNPLANNED_NOTES + 1) + index.catalog.sections as usize
        );
        assert!(
            lazy.chunks.abs_diff(exact) <= exact / 2,
            "{} {exact}",
            lazy.chunks
        );
        let bound = ON_THE_FLY;
        assert_eq!(
            lazy.embed_notes(&vault, embedder.as_ref(), &[5], &bound),
            per_note
        );
        let query = embedder.embed("leader 5");
        assert_eq!(lazy.search(&query, 10, &|_| true)[0].0, 5);

        // Another process finds note 5's vectors in the journal when a
        // query asks about it: nothing is embedded again.
        let again = open_as_stored(&dir, &index, embedder.as_ref(), EmbedMode::Bounded);
        assert_eq!(again.done_chunks(), 0, "note 5 was never chunked here");
        let refusing = GivesUp {
            inner: embedder.as_ref(),
            left: 0.into(),
        };
        assert_eq!(again.embed_notes(&vault, &refusing, &[5], &bound), per_note);
        assert_eq!(again.done_chunks(), per_note);

        // A complete sync embeds the rest; the count is exact again.
        let complete = open_as_stored(&dir, &index, embedder.as_ref(), EmbedMode::Complete);
        assert!(!complete.is_partial() && !complete.is_estimated());
        assert_eq!(complete.chunks, exact);
        assert_eq!(complete.embedded, exact - per_note);
    }

    #[test]
    fn a_small_vault_or_edit_is_embedded_at_once() {
        let tmp = tempfile::tempdir().unwrap();
        let (embedder, dir, index) = three_notes(tmp.path());
        let opened = open_as_stored(&dir, &index, embedder.as_ref(), EmbedMode::Bounded);
        assert!(!opened.is_partial());
        assert_eq!(opened.embedded, opened.chunks);
        assert!(opened.chunks <= OPEN_CHUNKS);
        assert_eq!(embedding_progress(&dir, embedder.fingerprint()), None);
    }

    fn sync_as_stored(dir: &Path, index: &VaultIndex, embedder: &dyn Embedder) -> SemanticIndex {
        SemanticIndex::sync(
            dir,
            &index.vault(),
            &index.catalog,
            embedder,
            None,
            &Progress::none(),
        )
        .unwrap()
    }

    /// Three small notes indexed under `tmp`, and the tiny embedder.
    fn three_notes(tmp: &Path) -> (Box<dyn Embedder>, PathBuf, VaultIndex) {
        let root = tmp.join("vault");
        fs::create_dir_all(&root).unwrap();
        for (name, text) in [
            ("a.md", "# Raft\n\nraft leader\n\n## Log\n\nlogs\n"),
            ("b.md", "# 共识\n\n共识 领导\n"),
            ("c.md", "# Leader\n\nleader raft logs\n"),
        ] {
            fs::write(root.join(name), text).unwrap();
        }
        let embedder = tiny_embedder(tmp);
        let dir = tmp.join("index");
        let (index, _) = VaultIndex::open(&root, &IndexConfig::new(dir.clone())).unwrap();
        (embedder, dir, index)
    }

    #[test]
    fn the_hnsw_graph_gives_the_exact_answers_on_a_small_vault() {
        let tmp = tempfile::tempdir().unwrap();
        let (embedder, dir, index) = three_notes(tmp.path());
        let mut vectors = sync_as_stored(&dir, &index, embedder.as_ref());
        assert!(
            !vectors.use_ann(&dir, AnnChoice::Auto).unwrap(),
            "small: exact"
        );
        let query = embedder.embed("raft leader");
        let exact = vectors.search(&query, 10, &|_| true);
        assert!(vectors.use_ann(&dir, AnnChoice::Always).unwrap());
        assert!(vectors.ann_built());
        assert_eq!(vectors.search(&query, 10, &|_| true), exact);
        // Filters apply to the graph's hits too.
        let only_c = vectors.search(&query, 10, &|note| note == 2);
        assert_eq!(only_c.len(), 1);
        assert_eq!(only_c[0].0, 2);
        // Stored: a second session loads it instead of building.
        let mut again = sync_as_stored(&dir, &index, embedder.as_ref());
        assert!(again.use_ann(&dir, AnnChoice::Always).unwrap());
        assert!(!again.ann_built());
        assert_eq!(again.search(&query, 10, &|_| true), exact);
    }

    #[test]
    fn int8_vectors_are_a_quarter_the_size_and_rank_alike() {
        let tmp = tempfile::tempdir().unwrap();
        let (embedder, dir, index) = three_notes(tmp.path());
        let vault = index.vault();
        let sync = |format| {
            SemanticIndex::sync(
                &dir,
                &vault,
                &index.catalog,
                embedder.as_ref(),
                format,
                &Progress::none(),
            )
            .unwrap()
        };
        let query = embedder.embed("raft leader");
        let exact = sync(None).search(&query, 10, &|_| true);
        let fingerprint = embedder.fingerprint();
        let f32_size = fs::metadata(data_file(&dir, fingerprint, VectorFormat::F32))
            .unwrap()
            .len();

        // Converted on request; the f32 file is gone; the order is the same
        // and the scores within 2%.
        let int8 = sync(Some(VectorFormat::Int8));
        assert_eq!(int8.embedded, 0, "converting does not embed");
        let hits = int8.search(&query, 10, &|_| true);
        assert!(!data_file(&dir, fingerprint, VectorFormat::F32).exists());
        let int8_size = fs::metadata(data_file(&dir, fingerprint, VectorFormat::Int8))
            .unwrap()
            .len();
        let chunks = int8.chunks as u64;
        assert_eq!(int8_size, chunks * (4 + embedder.dims() as u64));
        assert_eq!(f32_size, chunks * 4 * embedder.dims() as u64);
        let order = |h: &[(usize, f32)]| h.iter().map(|x| x.0).collect::<Vec<_>>();
        assert_eq!(order(&hits), order(&exact));
        for (a, b) in hits.iter().zip(&exact) {
            assert!(
                (a.1 - b.1).abs() <= 0.02 * b.1.abs().max(0.1),
                "{a:?} {b:?}"
            );
        }
        // Kept as stored when not asked, and the same numbers whether just
        // converted or mapped from the file.
        let again = sync(None);
        assert_eq!(again.vectors.format(), VectorFormat::Int8);
        assert_eq!(again.search(&query, 10, &|_| true), hits);
        // And back.
        let back = sync(Some(VectorFormat::F32));
        assert_eq!(back.vectors.format(), VectorFormat::F32);
        assert!(!data_file(&dir, fingerprint, VectorFormat::Int8).exists());
    }
}
