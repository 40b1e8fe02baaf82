//! The catalog: what the index knows about every file besides its terms —
//! the change-detection manifest, every note's metadata, the role files'
//! data and the diagnostics. Stored content-addressed next to the tantivy
//! index, whose commit payload names the catalog that belongs to it.

use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::note::Diagnostic;
use crate::note_tables::{Blob, BlobBytes, KeysTable, MetaTable};
use crate::vault::LinkResolver;

/// The file entries and the backlinks kept are the analysed note's (the
/// PostgreSQL store keeps the same ones).
pub(crate) use crate::analysis::{BACKLINKS_KEPT, FileEntry};

/// The small parts of a catalog, stored together.
#[derive(Serialize)]
struct RestRef<'a> {
    root: &'a str,
    index_descriptions: &'a [(u32, String)],
    hot: &'a [u32],
    walk_problems: &'a [Diagnostic],
    diagnostics: &'a [Diagnostic],
    bases: &'a [String],
    files: u64,
    sections: u64,
    updated_at: i64,
}

#[derive(Deserialize)]
struct Rest {
    root: String,
    index_descriptions: Vec<(u32, String)>,
    hot: Vec<u32>,
    walk_problems: Vec<Diagnostic>,
    diagnostics: Vec<Diagnostic>,
    bases: Vec<String>,
    files: u64,
    sections: u64,
    updated_at: i64,
}

/// A link from one note to another, with where its sentence is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LinkRecord {
    /// The note linked to, by index into `Catalog::metas` (resolved when
    /// the catalog was written).
    pub target: u32,
    /// The target as written, kept to resolve it again when notes change;
    /// empty when it is the target's own name.
    pub raw: String,
    /// A Markdown link (resolved relative to the linking note first).
    pub markdown: bool,
    /// Byte range, in the source note's body, of the sentence around it.
    pub context: (u32, u32),
}

/// What the index knows about every file besides its terms. Loaded, it is
/// read in place: the file list is decoded only by what compares or counts
/// files (an update, `status`), a note's metadata when it is asked for,
/// and the match keys never.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalog {
    /// The canonical vault root the index was built from.
    pub root: String,
    files: Files,
    /// Every packable note, sorted by path.
    pub metas: Arc<MetaTable>,
    /// The relevance pass's folded keys, parallel to `metas`.
    pub match_keys: Arc<KeysTable>,
    /// The link resolver's tables over `metas`.
    pub resolver: Arc<LinkResolver>,
    /// Descriptions from `index.md`, by note index.
    pub index_descriptions: Vec<(u32, String)>,
    /// Notes linked from `hot.md`, in order.
    pub hot: Vec<u32>,
    /// Problems of the walk itself (not tied to one readable file).
    pub walk_problems: Vec<Diagnostic>,
    /// The walk's problems and every file's, sorted: what a vault reports.
    pub diagnostics: Vec<Diagnostic>,
    /// The Bases files walked, sorted.
    pub bases: Vec<String>,
    /// How many files the list holds (known without decoding it).
    pub file_count: usize,
    /// Sections indexed in all notes.
    pub sections: u64,
    /// Seconds since the epoch of the last change (shown by `status`).
    pub updated_at: i64,
}

/// The file list, decoded on first use.
#[derive(Clone, Default)]
struct Files {
    decoded: OnceLock<Vec<FileEntry>>,
    encoded: Option<(Blob, Range<usize>)>,
    /// Each file's path (a range of the blob), size and time, read from
    /// the encoded list ahead of a comparison: the comparison a walk waits
    /// for is then a scan of this list.
    stats: OnceLock<Option<Vec<FileStat>>>,
}

/// A file's path as a range of the catalog blob, its size and its time.
#[derive(Clone)]
struct FileStat {
    path: Range<usize>,
    size: u64,
    mtime_ns: i128,
}

impl Files {
    /// The paths and stats of the encoded list (`None` when the list is
    /// decoded already, or cannot be read: the comparison reads it then).
    fn stats(&self) -> Option<&[FileStat]> {
        self.stats
            .get_or_init(|| {
                if self.decoded.get().is_some() {
                    return None;
                }
                let (blob, range) = self.encoded.as_ref()?;
                let bytes = blob.get(range.clone())?;
                let start = bytes.as_ptr() as usize - blob.as_ptr() as usize;
                let (count, mut rest) = postcard::take_from_bytes::<u64>(bytes).ok()?;
                // Every entry holds at least its 32-byte hash: a count the
                // bytes cannot hold reserves no more than they could.
                let mut stats =
                    Vec::with_capacity(usize::try_from(count).ok()?.min(bytes.len() / 32));
                for _ in 0..count {
                    let (file, after) = postcard::take_from_bytes::<FileStatRef<'_>>(rest).ok()?;
                    let at = file.path.as_ptr() as usize - bytes.as_ptr() as usize + start;
                    stats.push(FileStat {
                        path: at..at + file.path.len(),
                        size: file.size,
                        mtime_ns: file.mtime_ns,
                    });
                    rest = after;
                }
                Some(stats)
            })
            .as_deref()
    }

    fn get(&self) -> &[FileEntry] {
        self.decoded.get_or_init(|| {
            // The blob's hash matched when it was loaded, so this decodes;
            // were it not to, an empty list makes the next update re-read
            // every file rather than trust a list it cannot read.
            self.encoded
                .as_ref()
                .and_then(|(blob, range)| postcard::from_bytes(blob.get(range.clone())?).ok())
                .unwrap_or_default()
        })
    }
}

/// See [`Catalog::freshness`].
pub(crate) struct Freshness {
    files: Files,
    walk_problems: Vec<Diagnostic>,
    file_count: usize,
}

impl Freshness {
    /// Whether `walked` finds the vault as the catalog has it: the test an
    /// update makes before it changes anything.
    pub(crate) fn holds(
        &self,
        walked: &crate::vault::walk::WalkResult,
        policy: &crate::privacy::Policy,
    ) -> bool {
        let problems = crate::analysis::walk_diagnostics(walked.problems.clone(), policy);
        if problems != self.walk_problems {
            return false;
        }
        let files = &walked.files;
        if files.iter().is_sorted_by(|a, b| a.rel_path <= b.rel_path) {
            return self.files.unchanged(
                files.len(),
                files
                    .iter()
                    .map(|found| (found.rel_path.as_str(), found.stat)),
            );
        }
        let mut sorted: Vec<&crate::vault::walk::Found> = files.iter().collect();
        sorted.sort_by(|a, b| a.rel_path.cmp(&b.rel_path));
        self.files.unchanged(
            sorted.len(),
            sorted
                .into_iter()
                .map(|found| (found.rel_path.as_str(), found.stat)),
        )
    }

    pub(crate) fn file_count(&self) -> usize {
        self.file_count
    }

    /// Reads the file list's paths and stats now, so that [`Self::holds`]
    /// is a scan (called beside the walk, whose end it would delay).
    pub(crate) fn prepare(&self) {
        let _ = self.files.stats();
    }
}

/// A [`FileEntry`] read in place: the fields change detection compares.
#[derive(Deserialize)]
#[allow(dead_code)] // Every field is read to reach the next entry.
struct FileStatRef<'a> {
    path: &'a str,
    size: u64,
    mtime_ns: i128,
    hash: [u8; 32],
    #[serde(borrow)]
    problems: Vec<&'a str>,
    is_note: bool,
    sections: u32,
    link_target: Option<&'a str>,
}

impl Files {
    /// Whether `walked` (path, then stat) lists exactly these files with
    /// their recorded sizes and times. The list is read in place when it
    /// was not decoded yet, which on a large vault is most of a no-op
    /// update's cost.
    fn unchanged<'w>(
        &self,
        count: usize,
        walked: impl Iterator<Item = (&'w str, Option<(u64, i128)>)>,
    ) -> bool {
        let same = |path: &str, size: u64, mtime: i128, walked: (&str, Option<(u64, i128)>)| {
            walked.0 == path && walked.1 == Some((size, mtime))
        };
        if let Some(files) = self.decoded.get() {
            return files.len() == count
                && files
                    .iter()
                    .zip(walked)
                    .all(|(file, found)| same(&file.path, file.size, file.mtime_ns, found));
        }
        let Some((blob, range)) = &self.encoded else {
            return count == 0;
        };
        if let Some(stats) = self.stats() {
            return stats.len() == count
                && stats.iter().zip(walked).all(|(file, found)| {
                    blob.get(file.path.clone()) == Some(found.0.as_bytes())
                        && found.1 == Some((file.size, file.mtime_ns))
                });
        }
        // A sequence is its length, then its items: read one at a time.
        let Some(Ok((encoded_count, mut rest))) = blob
            .get(range.clone())
            .map(postcard::take_from_bytes::<u64>)
        else {
            return false;
        };
        if usize::try_from(encoded_count) != Ok(count) {
            return false;
        }
        for found in walked {
            let Ok((file, after)) = postcard::take_from_bytes::<FileStatRef<'_>>(rest) else {
                return false;
            };
            if !same(file.path, file.size, file.mtime_ns, found) {
                return false;
            }
            rest = after;
        }
        true
    }
}

impl PartialEq for Files {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for Files {}

impl std::fmt::Debug for Files {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.get()).finish()
    }
}

/// The parts of a catalog blob, in order.
const PARTS: usize = 5;

impl Catalog {
    /// A catalog of values just computed: `files` in any order.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        root: String,
        mut files: Vec<FileEntry>,
        metas: Arc<MetaTable>,
        match_keys: Arc<KeysTable>,
        resolver: Arc<LinkResolver>,
        index_descriptions: Vec<(u32, String)>,
        hot: Vec<u32>,
        walk_problems: Vec<Diagnostic>,
        updated_at: i64,
    ) -> Catalog {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let file_count = files.len();
        let sections = files.iter().map(|f| u64::from(f.sections)).sum();
        let mut diagnostics = walk_problems.clone();
        for file in &files {
            for message in &file.problems {
                diagnostics.push(Diagnostic {
                    path: file.path.clone(),
                    message: message.clone(),
                });
            }
        }
        diagnostics.sort();
        let bases = files
            .iter()
            .filter(|f| crate::vault::walk::is_base(&f.path))
            .map(|f| f.path.clone())
            .collect();
        Catalog {
            root,
            files: Files {
                decoded: OnceLock::from(files),
                encoded: None,
                stats: OnceLock::new(),
            },
            metas,
            match_keys,
            resolver,
            index_descriptions,
            hot,
            walk_problems,
            diagnostics,
            bases,
            file_count,
            sections,
            updated_at,
        }
    }

    /// Every Markdown file walked, sorted by path.
    pub fn files(&self) -> &[FileEntry] {
        self.files.get()
    }

    /// Whether `walked` (sorted by path) finds every file as recorded:
    /// the same paths, sizes and modification times.
    /// What tells, after a walk, whether the vault is still as this
    /// catalog has it; cheap to take before the catalog moves on (the file
    /// list's bytes are shared, not copied).
    pub(crate) fn freshness(&self) -> Freshness {
        Freshness {
            files: self.files.clone(),
            walk_problems: self.walk_problems.clone(),
            file_count: self.file_count,
        }
    }

    pub(crate) fn files_unchanged(&self, walked: &crate::vault::walk::FoundFiles) -> bool {
        self.files.unchanged(
            walked.len(),
            walked
                .iter()
                .map(|found| (found.rel_path.as_str(), found.stat)),
        )
    }

    /// Writes the catalog as a blob of five length-prefixed parts (files,
    /// notes, match keys, the rest, the link resolver) and returns the hash
    /// that names it.
    pub fn save(&self, dir: &Path) -> Result<String> {
        let rest = RestRef {
            root: &self.root,
            index_descriptions: &self.index_descriptions,
            hot: &self.hot,
            walk_problems: &self.walk_problems,
            diagnostics: &self.diagnostics,
            bases: &self.bases,
            files: self.file_count as u64,
            sections: self.sections,
            updated_at: self.updated_at,
        };
        let parts: [Vec<u8>; PARTS] = [
            postcard::to_allocvec(self.files())?,
            self.metas.encode()?,
            self.match_keys.encoded().to_vec(),
            postcard::to_allocvec(&rest)?,
            self.resolver.encode(),
        ];
        let mut bytes = Vec::with_capacity(parts.iter().map(|p| p.len() + 8).sum());
        for part in &parts {
            bytes.extend_from_slice(&(part.len() as u64).to_le_bytes());
            bytes.extend_from_slice(part);
        }
        save_bytes(dir, "catalog", &bytes)
    }

    /// Reads the catalog blob named `hash`. Only its small part is decoded;
    /// the offsets of the others are checked beside the blob's hash.
    pub fn load(dir: &Path, hash: &str) -> Result<Catalog> {
        let path = blob_path(dir, "catalog", hash);
        let file = crate::safe_fs::open_regular(&path)
            .with_context(|| format!("read {}", path.display()))?;
        // SAFETY: blobs are content-addressed and only ever replaced by
        // rename or removed, never written in place, so the mapping stays
        // valid (and its bytes unchanged) while it is used.
        let map = unsafe { memmap2::Mmap::map(&file) }
            .with_context(|| format!("read {}", path.display()))?;
        let blob: Blob = Arc::new(BlobBytes::Mapped(map));
        let stamp = stat_stamp(&file);
        let checked = stamp
            .as_ref()
            .is_some_and(|stamp| was_checked(&path, stamp));
        let damaged = || anyhow::anyhow!("{} is damaged", path.display());
        let mut parts: Vec<Range<usize>> = Vec::with_capacity(PARTS);
        let mut at = 0usize;
        for _ in 0..PARTS {
            let len = blob.get(at..at + 8).ok_or_else(damaged)?;
            let len = u64::from_le_bytes(len.try_into().map_err(|_| damaged())?);
            let len = usize::try_from(len).map_err(|_| damaged())?;
            let start = at + 8;
            let end = start
                .checked_add(len)
                .filter(|&end| end <= blob.len())
                .ok_or_else(damaged)?;
            parts.push(start..end);
            at = end;
        }
        if at != blob.len() {
            return Err(damaged());
        }
        let decode_error =
            |what: &str, err: String| anyhow::anyhow!("decode {} ({what}): {err}", path.display());
        let (intact, (tables, rest)) = rayon::join(
            || {
                checked
                    || blake3::Hasher::new()
                        .update_rayon(&blob)
                        .finalize()
                        .to_hex()[..32]
                        == *hash
            },
            || {
                rayon::join(
                    || {
                        (
                            MetaTable::decode(Arc::clone(&blob), parts[1].clone()),
                            KeysTable::decode(Arc::clone(&blob), parts[2].clone()),
                            LinkResolver::decode(Arc::clone(&blob), parts[4].clone()),
                        )
                    },
                    || postcard::from_bytes::<Rest>(&blob[parts[3].clone()]),
                )
            },
        );
        if !intact {
            bail!("{} is damaged (hash mismatch)", path.display());
        }
        if let Some(stamp) = stamp.filter(|stamp| !checked && stamp.settled) {
            mark_checked(&path, &stamp);
        }
        let (metas, match_keys, resolver) = tables;
        let rest = rest.map_err(|err| decode_error("summary", err.to_string()))?;
        let metas = metas.map_err(|err| decode_error("notes", err.to_string()))?;
        let match_keys = match_keys.map_err(|err| decode_error("match keys", err.to_string()))?;
        let resolver = resolver.map_err(|err| decode_error("link names", err.to_string()))?;
        if match_keys.len() != metas.len() {
            bail!("{} is damaged (notes and keys differ)", path.display());
        }
        Ok(Catalog {
            root: rest.root,
            files: Files {
                decoded: OnceLock::new(),
                encoded: Some((Arc::clone(&blob), parts[0].clone())),
                stats: OnceLock::new(),
            },
            metas: Arc::new(metas),
            match_keys: Arc::new(match_keys),
            resolver: Arc::new(resolver),
            index_descriptions: rest.index_descriptions,
            hot: rest.hot,
            walk_problems: rest.walk_problems,
            diagnostics: rest.diagnostics,
            bases: rest.bases,
            file_count: usize::try_from(rest.files).map_err(|_| damaged())?,
            sections: rest.sections,
            updated_at: rest.updated_at,
        })
    }

    pub fn note_index(&self, path: &str) -> Option<usize> {
        self.metas.position(path)
    }

    /// Files read without problems that are not notes or role files: the
    /// notes the privacy policy keeps out.
    pub fn private_notes(&self) -> usize {
        self.files()
            .iter()
            .filter(|f| {
                !f.is_note
                    && f.problems.is_empty()
                    && f.hash != [0; 32]
                    && !crate::vault::walk::ROLE_FILES.contains(&f.path.as_str())
            })
            .count()
    }

    pub fn file(&self, path: &str) -> Option<&FileEntry> {
        let files = self.files();
        files
            .binary_search_by(|f| f.path.as_str().cmp(path))
            .ok()
            .map(|i| &files[i])
    }
}

/// Outgoing links of every note, parallel to `Catalog::metas`; kept apart
/// from the catalog because only backlink lookups and updates need it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LinkTable {
    pub links: Vec<Vec<LinkRecord>>,
}

/// Writes `value` as `<kind>-<hash>.bin` (fsynced, then renamed into place)
/// and returns the hash that names it.
pub(crate) fn save_blob<T: Serialize>(dir: &Path, kind: &str, value: &T) -> Result<String> {
    let bytes = postcard::to_allocvec(value).with_context(|| format!("encode {kind}"))?;
    save_bytes(dir, kind, &bytes)
}

/// Writes `bytes` as `<kind>-<hash>.bin` (fsynced, then renamed into
/// place) and returns the hash that names it.
pub(crate) fn save_bytes(dir: &Path, kind: &str, bytes: &[u8]) -> Result<String> {
    let hash = blake3::hash(bytes).to_hex()[..32].to_string();
    let target = blob_path(dir, kind, &hash);
    if fs::read(&target).is_ok_and(|existing| existing == bytes) {
        return Ok(hash);
    }
    crate::safe_fs::write_atomic(&target, bytes)
        .with_context(|| format!("write {}", target.display()))?;
    Ok(hash)
}

/// Reads the blob `<kind>-<hash>.bin`, checking that its content matches.
pub(crate) fn load_blob<T: for<'de> Deserialize<'de>>(
    dir: &Path,
    kind: &str,
    hash: &str,
) -> Result<T> {
    let path = blob_path(dir, kind, hash);
    let bytes = fs::read(&path).with_context(|| format!("read {}", path.display()))?;
    if blake3::hash(&bytes).to_hex()[..32] != *hash {
        bail!("{} is damaged (hash mismatch)", path.display());
    }
    postcard::from_bytes(&bytes).with_context(|| format!("decode {}", path.display()))
}

/// The bytes of the blob `<kind>-<hash>.bin`, checked against its hash
/// unless they were already checked and the file is unchanged since (as
/// the catalog is): for a blob read in place rather than decoded whole.
pub(crate) fn load_blob_bytes(dir: &Path, kind: &str, hash: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let path = blob_path(dir, kind, hash);
    let mut file =
        crate::safe_fs::open_regular(&path).with_context(|| format!("read {}", path.display()))?;
    let stamp = stat_stamp(&file);
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .with_context(|| format!("read {}", path.display()))?;
    let checked = stamp
        .as_ref()
        .is_some_and(|stamp| was_checked(&path, stamp));
    if !checked {
        if blake3::hash(&bytes).to_hex()[..32] != *hash {
            bail!("{} is damaged (hash mismatch)", path.display());
        }
        if let Some(stamp) = stamp.filter(|stamp| stamp.settled) {
            mark_checked(&path, &stamp);
        }
    }
    Ok(bytes)
}

/// What a blob file's hash was checked against: its identity, size and
/// times. Blobs are written once and renamed into place, so while these
/// are unchanged the bytes are too, and a call need not hash a large
/// catalog again (git trusts its index's stat data the same way).
struct StatStamp {
    line: String,
    /// Last modified long enough ago that a write within the file
    /// system's timestamp granularity cannot hide behind an equal time.
    settled: bool,
}

/// How long a blob must have been unmodified before its check is
/// remembered.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

fn stat_stamp(file: &fs::File) -> Option<StatStamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().ok()?;
    let settled = meta
        .modified()
        .ok()
        .and_then(|modified| modified.elapsed().ok())
        .is_some_and(|age| age >= SETTLE);
    Some(StatStamp {
        line: format!(
            "{} {} {} {}.{} {}.{}",
            meta.dev(),
            meta.ino(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec()
        ),
        settled,
    })
}

/// `catalog-<hash>.checked`: the stat line of the blob when its hash
/// last matched.
fn checked_marker(blob: &Path) -> PathBuf {
    blob.with_extension("checked")
}

fn was_checked(blob: &Path, stamp: &StatStamp) -> bool {
    use std::io::Read;
    let mut line = String::new();
    crate::safe_fs::open_regular(&checked_marker(blob))
        .and_then(|file| file.take(256).read_to_string(&mut line))
        .is_ok_and(|_| line == stamp.line)
}

/// Best effort: a read-only index folder only means hashing every time.
fn mark_checked(blob: &Path, stamp: &StatStamp) {
    // A lost marker costs one more hash; a sync would cost every reader.
    let _ = crate::safe_fs::write_atomic_cache(&checked_marker(blob), stamp.line.as_bytes());
}

pub(crate) fn blob_path(dir: &Path, kind: &str, hash: &str) -> PathBuf {
    dir.join(format!("{kind}-{hash}.bin"))
}

/// The kinds of content-addressed blob an index commit names.
const BLOB_KINDS: [&str; 4] = ["catalog-", "links-", "backlinks-", "props-"];

/// Removes blobs of every kind, their `.checked` side files, and leftover
/// temporary files, unless their name holds a hash in `keep`.
pub(crate) fn remove_stale(dir: &Path, keep: &[String]) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let is_blob = BLOB_KINDS.iter().any(|p| name.starts_with(p))
            && (name.ends_with(".bin") || name.ends_with(".checked"));
        let is_temp = name.starts_with('.') && name.ends_with(".tmp");
        let kept = keep.iter().any(|hash| name.contains(hash.as_str()));
        if (is_blob && !kept) || is_temp {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// How many backlinks are kept per note in the backlink file.
const BACKLINKS_MAGIC: &[u8; 4] = b"CPBL";

/// Encodes, for every note, the first [`BACKLINKS_KEPT`] other notes
/// linking to it (in path order) with the byte range of the linking
/// sentence, as a table a reader can seek into without decoding the rest:
/// a header, one `(offset, count)` entry per note, then `(source, start,
/// end)` records, all little-endian `u32`.
pub(crate) fn encode_backlinks(table: &LinkTable, notes: usize) -> Vec<u8> {
    let incoming = crate::analysis::first_backlinks(
        notes,
        table.links.iter().enumerate().flat_map(|(source, links)| {
            links
                .iter()
                .map(move |link| (source, link.target as usize, link.context))
        }),
    );
    let mut bytes = Vec::new();
    bytes.extend_from_slice(BACKLINKS_MAGIC);
    bytes.extend_from_slice(&(notes as u32).to_le_bytes());
    let mut offset = 0u32;
    for list in &incoming {
        bytes.extend_from_slice(&offset.to_le_bytes());
        bytes.extend_from_slice(&(list.len() as u32).to_le_bytes());
        offset += list.len() as u32;
    }
    for &(source, start, end) in incoming.iter().flatten() {
        for value in [source as u32, start, end] {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
    }
    bytes
}

/// Reads the backlink records of note `target` from an encoded table.
pub(crate) fn read_backlinks(file: &fs::File, target: usize) -> Vec<[u32; 3]> {
    use std::os::unix::fs::FileExt;
    let read_u32s = |at: u64, count: usize| -> Option<Vec<u32>> {
        let mut buffer = vec![0u8; count * 4];
        file.read_exact_at(&mut buffer, at).ok()?;
        Some(
            buffer
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        )
    };
    let mut magic = [0u8; 4];
    if file.read_exact_at(&mut magic, 0).is_err() || &magic != BACKLINKS_MAGIC {
        return Vec::new();
    }
    let Some(notes) = read_u32s(4, 1).map(|v| v[0] as usize) else {
        return Vec::new();
    };
    if target >= notes {
        return Vec::new();
    }
    let Some(entry) = read_u32s(8 + target as u64 * 8, 2) else {
        return Vec::new();
    };
    let (offset, count) = (entry[0] as u64, (entry[1] as usize).min(BACKLINKS_KEPT));
    let records_at = 8 + notes as u64 * 8 + offset * 12;
    read_u32s(records_at, count * 3)
        .map(|values| values.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, size: u64, mtime_ns: i128, link_target: Option<&str>) -> FileEntry {
        FileEntry {
            path: path.into(),
            size,
            mtime_ns,
            hash: [7; 32],
            problems: vec!["a problem".into()],
            is_note: true,
            sections: 3,
            link_target: link_target.map(Into::into),
        }
    }

    #[test]
    fn the_file_list_read_in_place_compares_as_the_decoded_one_does() {
        let entries = vec![
            entry("a.md", 10, 1_700_000_000_123_456_789, None),
            entry("b/c.md", 0, -5, Some("a.md")),
            entry("é.md", u64::MAX, i128::MAX, None),
        ];
        let bytes = postcard::to_allocvec(&entries).unwrap();
        let len = bytes.len();
        let blob: Blob = Arc::new(bytes.into());
        let in_place = Files {
            decoded: OnceLock::new(),
            encoded: Some((Arc::clone(&blob), 0..len)),
            stats: OnceLock::new(),
        };
        // The same bytes with their paths and stats read ahead, as a
        // speculating open does beside the walk.
        let read_ahead = in_place.clone();
        assert_eq!(read_ahead.stats().map(<[FileStat]>::len), Some(3));
        let decoded = Files {
            decoded: OnceLock::from(entries.clone()),
            encoded: None,
            stats: OnceLock::new(),
        };
        let walked = |files: &[(&'static str, Option<(u64, i128)>)]| files.to_vec();
        let same = walked(&[
            ("a.md", Some((10, 1_700_000_000_123_456_789))),
            ("b/c.md", Some((0, -5))),
            ("é.md", Some((u64::MAX, i128::MAX))),
        ]);
        let mut touched = same.clone();
        touched[1].1 = Some((0, -4));
        let mut unreadable = same.clone();
        unreadable[2].1 = None;
        let mut renamed = same.clone();
        renamed[0].0 = "a2.md";
        let cases = [
            (same.clone(), true),
            (touched, false),
            (unreadable, false),
            (renamed, false),
            (same[..2].to_vec(), false),
        ];
        for (walk, expected) in cases {
            for files in [&in_place, &read_ahead, &decoded] {
                assert_eq!(
                    files.unchanged(walk.len(), walk.iter().copied()),
                    expected,
                    "{walk:?}"
                );
            }
        }
        let cut = Files {
            decoded: OnceLock::new(),
            encoded: Some((blob, 0..len - 1)),
            stats: OnceLock::new(),
        };
        assert!(!cut.unchanged(same.len(), same.iter().copied()));
        // A list that cannot be read ahead is compared as it is read.
        assert!(cut.stats().is_none());
        assert!(!cut.unchanged(same.len(), same.iter().copied()));
    }
}
