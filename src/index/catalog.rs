//! The catalog: what the index knows about every file besides its terms —
//! the change-detection manifest, every note's metadata, the role files'
//! data and the diagnostics. Stored content-addressed next to the tantivy
//! index, whose commit payload names the catalog that belongs to it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::note::MatchKeys;
use crate::note::{Diagnostic, NoteMeta};

/// One Markdown file as last seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub path: String,
    pub size: u64,
    pub mtime_ns: i128,
    pub hash: [u8; 32],
    /// Problems found reading or parsing it (a skipped file has one).
    pub problems: Vec<String>,
    /// Whether the file is a packable note (not skipped, not a role file).
    pub is_note: bool,
    /// How many sections of the note are indexed.
    pub sections: u32,
    /// For a symlink, its target's relative path (a change to the target
    /// is a change to the link).
    pub link_target: Option<String>,
}

/// The small parts of a catalog, stored together.
#[derive(Serialize)]
struct RestRef<'a> {
    root: &'a str,
    index_descriptions: &'a [(u32, String)],
    hot: &'a [u32],
    walk_problems: &'a [Diagnostic],
    sections: u64,
    updated_at: i64,
}

#[derive(Deserialize)]
struct Rest {
    root: String,
    index_descriptions: Vec<(u32, String)>,
    hot: Vec<u32>,
    walk_problems: Vec<Diagnostic>,
    sections: u64,
    updated_at: i64,
}

impl Catalog {
    /// Writes the catalog as a blob of four parts, each encoded on its
    /// own (length-prefixed), and returns the hash that names it.
    pub fn save(&self, dir: &Path) -> Result<String> {
        let rest = RestRef {
            root: &self.root,
            index_descriptions: &self.index_descriptions,
            hot: &self.hot,
            walk_problems: &self.walk_problems,
            sections: self.sections,
            updated_at: self.updated_at,
        };
        let parts = [
            postcard::to_allocvec(&self.files)?,
            postcard::to_allocvec(&*self.metas)?,
            postcard::to_allocvec(&*self.match_keys)?,
            postcard::to_allocvec(&rest)?,
        ];
        let mut bytes = Vec::with_capacity(parts.iter().map(|p| p.len() + 8).sum());
        for part in &parts {
            bytes.extend_from_slice(&(part.len() as u64).to_le_bytes());
            bytes.extend_from_slice(part);
        }
        save_bytes(dir, "catalog", &bytes)
    }

    /// Reads the catalog blob named `hash`: its parts are decoded in
    /// parallel, and its hash checked alongside (decoding damaged bytes
    /// gives an error or values that are then thrown away).
    pub fn load(dir: &Path, hash: &str) -> Result<Catalog> {
        let path = blob_path(dir, "catalog", hash);
        let bytes = fs::read(&path).with_context(|| format!("read {}", path.display()))?;
        let damaged = || anyhow::anyhow!("{} is damaged", path.display());
        let mut parts: Vec<&[u8]> = Vec::with_capacity(4);
        let mut rest = bytes.as_slice();
        for _ in 0..4 {
            let (len, tail) = rest.split_first_chunk::<8>().ok_or_else(damaged)?;
            let len = usize::try_from(u64::from_le_bytes(*len)).map_err(|_| damaged())?;
            if len > tail.len() {
                return Err(damaged());
            }
            let (part, tail) = tail.split_at(len);
            parts.push(part);
            rest = tail;
        }
        let decode_error = |what: &str, err: postcard::Error| {
            anyhow::anyhow!("decode {} ({what}): {err}", path.display())
        };
        let ((intact, files), ((metas, match_keys), small)) = rayon::join(
            || {
                rayon::join(
                    || blake3::hash(&bytes).to_hex()[..32] == *hash,
                    || postcard::from_bytes::<Vec<FileEntry>>(parts[0]),
                )
            },
            || {
                rayon::join(
                    || {
                        rayon::join(
                            || postcard::from_bytes::<Vec<NoteMeta>>(parts[1]),
                            || postcard::from_bytes::<Vec<MatchKeys>>(parts[2]),
                        )
                    },
                    || postcard::from_bytes::<Rest>(parts[3]),
                )
            },
        );
        if !intact || !rest.is_empty() {
            bail!("{} is damaged (hash mismatch)", path.display());
        }
        let small = small.map_err(|err| decode_error("summary", err))?;
        Ok(Catalog {
            root: small.root,
            files: files.map_err(|err| decode_error("files", err))?,
            metas: Arc::new(metas.map_err(|err| decode_error("notes", err))?),
            match_keys: Arc::new(match_keys.map_err(|err| decode_error("match keys", err))?),
            index_descriptions: small.index_descriptions,
            hot: small.hot,
            walk_problems: small.walk_problems,
            sections: small.sections,
            updated_at: small.updated_at,
        })
    }
}

/// A link from one note to another, with where its sentence is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkRecord {
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

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalog {
    /// The canonical vault root the index was built from.
    pub root: String,
    /// Every Markdown file walked, sorted by path.
    pub files: Vec<FileEntry>,
    /// Every packable note, sorted by path.
    pub metas: Arc<Vec<NoteMeta>>,
    /// The relevance pass's folded keys, parallel to `metas`.
    pub match_keys: Arc<Vec<MatchKeys>>,
    /// Descriptions from `index.md`, by note index.
    pub index_descriptions: Vec<(u32, String)>,
    /// Notes linked from `hot.md`, in order.
    pub hot: Vec<u32>,
    /// Problems of the walk itself (not tied to one readable file).
    pub walk_problems: Vec<Diagnostic>,
    /// Sections indexed in all notes.
    pub sections: u64,
    /// Seconds since the epoch of the last change (shown by `status`).
    pub updated_at: i64,
}

impl Catalog {
    pub fn note_index(&self, path: &str) -> Option<usize> {
        self.metas
            .binary_search_by(|m| m.path.as_str().cmp(path))
            .ok()
    }

    /// Files read without problems that are not notes or role files: the
    /// notes the privacy policy keeps out.
    pub fn private_notes(&self) -> usize {
        self.files
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
        self.files
            .binary_search_by(|f| f.path.as_str().cmp(path))
            .ok()
            .map(|i| &self.files[i])
    }

    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        let mut all = self.walk_problems.clone();
        for file in &self.files {
            for message in &file.problems {
                all.push(Diagnostic {
                    path: file.path.clone(),
                    message: message.clone(),
                });
            }
        }
        all.sort();
        all
    }
}

/// Outgoing links of every note, parallel to `Catalog::metas`; kept apart
/// from the catalog because only backlink lookups and updates need it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkTable {
    pub links: Vec<Vec<LinkRecord>>,
}

/// Writes `value` as `<kind>-<hash>.bin` (fsynced, then renamed into place)
/// and returns the hash that names it.
pub fn save_blob<T: Serialize>(dir: &Path, kind: &str, value: &T) -> Result<String> {
    let bytes = postcard::to_allocvec(value).with_context(|| format!("encode {kind}"))?;
    save_bytes(dir, kind, &bytes)
}

/// Writes `bytes` as `<kind>-<hash>.bin` (fsynced, then renamed into
/// place) and returns the hash that names it.
pub fn save_bytes(dir: &Path, kind: &str, bytes: &[u8]) -> Result<String> {
    let hash = blake3::hash(bytes).to_hex()[..32].to_string();
    let target = blob_path(dir, kind, &hash);
    if fs::read(&target).is_ok_and(|existing| existing == bytes) {
        return Ok(hash);
    }
    let temp = dir.join(format!(".{kind}-{hash}.tmp"));
    let mut file = fs::File::create(&temp).with_context(|| format!("write {}", temp.display()))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    fs::rename(&temp, &target)?;
    if let Ok(dir) = fs::File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(hash)
}

/// Reads the blob `<kind>-<hash>.bin`, checking that its content matches.
pub fn load_blob<T: for<'de> Deserialize<'de>>(dir: &Path, kind: &str, hash: &str) -> Result<T> {
    let path = blob_path(dir, kind, hash);
    let bytes = fs::read(&path).with_context(|| format!("read {}", path.display()))?;
    if blake3::hash(&bytes).to_hex()[..32] != *hash {
        bail!("{} is damaged (hash mismatch)", path.display());
    }
    postcard::from_bytes(&bytes).with_context(|| format!("decode {}", path.display()))
}

pub fn blob_path(dir: &Path, kind: &str, hash: &str) -> PathBuf {
    dir.join(format!("{kind}-{hash}.bin"))
}

/// Removes blobs (and leftover temporary files) not named in `keep`.
pub fn remove_stale(dir: &Path, keep: &[String]) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let is_blob =
            ["catalog-", "links-"].iter().any(|p| name.starts_with(p)) && name.ends_with(".bin");
        let is_temp = name.starts_with('.') && name.ends_with(".tmp");
        let kept = keep.iter().any(|hash| name.contains(hash.as_str()));
        if (is_blob && !kept) || is_temp {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// How many backlinks are kept per note in the backlink file.
pub const BACKLINKS_KEPT: usize = 32;
const BACKLINKS_MAGIC: &[u8; 4] = b"CPBL";

/// Encodes, for every note, the first [`BACKLINKS_KEPT`] other notes
/// linking to it (in path order) with the byte range of the linking
/// sentence, as a table a reader can seek into without decoding the rest:
/// a header, one `(offset, count)` entry per note, then `(source, start,
/// end)` records, all little-endian `u32`.
pub fn encode_backlinks(table: &LinkTable, notes: usize) -> Vec<u8> {
    let mut incoming: Vec<Vec<[u32; 3]>> = vec![Vec::new(); notes];
    for (source, links) in table.links.iter().enumerate() {
        for link in links {
            let target = link.target as usize;
            if target == source || target >= notes {
                continue;
            }
            let list = &mut incoming[target];
            if list.len() < BACKLINKS_KEPT && list.iter().all(|r| r[0] != source as u32) {
                list.push([source as u32, link.context.0, link.context.1]);
            }
        }
    }
    let mut bytes = Vec::new();
    bytes.extend_from_slice(BACKLINKS_MAGIC);
    bytes.extend_from_slice(&(notes as u32).to_le_bytes());
    let mut offset = 0u32;
    for list in &incoming {
        bytes.extend_from_slice(&offset.to_le_bytes());
        bytes.extend_from_slice(&(list.len() as u32).to_le_bytes());
        offset += list.len() as u32;
    }
    for record in incoming.iter().flatten() {
        for value in record {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
    }
    bytes
}

/// Reads the backlink records of note `target` from an encoded table.
pub fn read_backlinks(file: &fs::File, target: usize) -> Vec<[u32; 3]> {
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
