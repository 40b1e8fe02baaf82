//! Vectors embedded but not yet written into a model's vector file.
//!
//! Embedding a large vault takes hours with a transformer model; the vector
//! file is written once, at the end. So that a killed or failed run loses at
//! most one batch, every embedded batch is first appended here
//! (`vectors-<fp>.journal`), and the next sync takes its vectors as cached.
//! The file goes once the vector file holding its vectors is written.
//!
//! Layout: a header (magic, dimensions), then records of the chunk's
//! content hash (16 bytes), its vector (`dims` little-endian f32) and the
//! first 8 bytes of the blake3 hash of both. Reading stops at the first
//! record that is cut short or fails its check, so a write torn by a kill
//! (or garbage after a power loss) costs only what follows it.

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"ctxvjnl1";
const CHECK_BYTES: usize = 8;
/// A journal larger than this is not read (it would hold over a million
/// chunks of 384 dimensions); the vectors are embedded again.
const MAX_JOURNAL_BYTES: u64 = 2 << 30;

fn path(dir: &Path, fingerprint: &str) -> PathBuf {
    dir.join(format!("vectors-{fingerprint}.journal"))
}

fn record_bytes(dims: usize) -> usize {
    16 + dims * 4 + CHECK_BYTES
}

fn check(record: &[u8]) -> [u8; CHECK_BYTES] {
    let hash = blake3::hash(record);
    let mut out = [0; CHECK_BYTES];
    out.copy_from_slice(&hash.as_bytes()[..CHECK_BYTES]);
    out
}

/// The vectors a journal holds, by chunk hash: empty when there is none,
/// it is for other dimensions, or it cannot be read. Read record by record,
/// so memory holds the vectors and one record.
pub(crate) fn read(dir: &Path, fingerprint: &str, dims: usize) -> HashMap<[u8; 16], Vec<f32>> {
    let mut found = HashMap::new();
    let Ok(file) = crate::safe_fs::open_regular(&path(dir, fingerprint)) else {
        return found;
    };
    if file
        .metadata()
        .map_or(true, |m| m.len() > MAX_JOURNAL_BYTES)
    {
        return found;
    }
    let mut reader = std::io::BufReader::new(file.take(MAX_JOURNAL_BYTES));
    let expected = header(dims);
    let mut head = vec![0; expected.len()];
    if reader.read_exact(&mut head).is_err() || head != expected {
        return found;
    }
    let mut record = vec![0; record_bytes(dims)];
    while reader.read_exact(&mut record).is_ok() {
        let (body, stored) = record.split_at(record.len() - CHECK_BYTES);
        if check(body) != stored {
            break;
        }
        let mut hash = [0; 16];
        hash.copy_from_slice(&body[..16]);
        let vector = body[16..]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        found.insert(hash, vector);
    }
    found
}

fn header(dims: usize) -> Vec<u8> {
    let mut header = MAGIC.to_vec();
    header.extend_from_slice(&(dims as u32).to_le_bytes());
    header
}

/// Appends batches to a model's journal.
pub(crate) struct Journal {
    file: Option<fs::File>,
    dims: usize,
}

impl Journal {
    /// Opens the journal for appending, starting it when it is missing or
    /// unreadable. Without a writable file the journal keeps nothing (the
    /// run goes on, only unprotected).
    pub(crate) fn open(dir: &Path, fingerprint: &str, dims: usize) -> Journal {
        let file = (|| -> std::io::Result<fs::File> {
            fs::create_dir_all(dir)?;
            let path = path(dir, fingerprint);
            let kept = read(dir, fingerprint, dims);
            // Records after a torn one would never be read: a journal is
            // rewritten from what it still holds before it grows again.
            let mut fresh = header(dims);
            let mut hashes: Vec<&[u8; 16]> = kept.keys().collect();
            hashes.sort_unstable();
            for hash in hashes {
                fresh.extend_from_slice(&encode(hash, &kept[hash]));
            }
            if fs::metadata(&path).map(|m| m.len()).ok() != Some(fresh.len() as u64) {
                crate::safe_fs::write_atomic(&path, &fresh)?;
            }
            fs::OpenOptions::new().append(true).open(&path)
        })()
        .ok();
        Journal { file, dims }
    }

    /// Opens the journal for appending without reading it first: the
    /// cheap open for a few vectors embedded on the fly, where the journal
    /// may hold a large vault's worth. Only a journal whose records are all
    /// whole is appended to this way (a torn last record would hide what
    /// follows it); any other goes through [`Journal::open`].
    pub(crate) fn open_append(dir: &Path, fingerprint: &str, dims: usize) -> Journal {
        let path = path(dir, fingerprint);
        let head = header(dims);
        let whole = crate::safe_fs::open_regular(&path)
            .ok()
            .and_then(|mut file| {
                let len = file.metadata().ok()?.len();
                let mut found = vec![0; head.len()];
                file.read_exact(&mut found).ok()?;
                let body = len.checked_sub(head.len() as u64)?;
                (found == head && body % record_bytes(dims) as u64 == 0).then_some(())
            });
        if whole.is_none() {
            return Journal::open(dir, fingerprint, dims);
        }
        let file = fs::OpenOptions::new().append(true).open(&path).ok();
        Journal { file, dims }
    }

    /// Appends one batch of (chunk hash, vector); a failed write stops the
    /// journal, not the run.
    pub(crate) fn append(&mut self, batch: &[(&[u8; 16], &[f32])]) {
        let Some(file) = &mut self.file else {
            return;
        };
        let mut bytes = Vec::with_capacity(batch.len() * record_bytes(self.dims));
        for (hash, vector) in batch {
            if vector.len() == self.dims {
                bytes.extend_from_slice(&encode(hash, vector));
            }
        }
        if file.write_all(&bytes).is_err() {
            self.file = None;
        }
    }
}

fn encode(hash: &[u8; 16], vector: &[f32]) -> Vec<u8> {
    let mut record = Vec::with_capacity(16 + vector.len() * 4 + CHECK_BYTES);
    record.extend_from_slice(hash);
    for x in vector {
        record.extend_from_slice(&x.to_le_bytes());
    }
    let check = check(&record);
    record.extend_from_slice(&check);
    record
}

/// Removes a model's journal once its vectors are in the vector file.
pub(crate) fn remove(dir: &Path, fingerprint: &str) {
    let _ = fs::remove_file(path(dir, fingerprint));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_read_back_and_a_torn_tail_is_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let (a, b, c) = ([1u8; 16], [2u8; 16], [3u8; 16]);
        let mut journal = Journal::open(dir, "fp", 2);
        journal.append(&[(&a, &[0.5, -1.0]), (&b, &[2.0, 3.0])]);
        journal.append(&[(&c, &[4.0, 5.0])]);
        let found = read(dir, "fp", 2);
        assert_eq!(found.len(), 3);
        assert_eq!(found[&b], vec![2.0, 3.0]);
        assert!(read(dir, "fp", 3).is_empty(), "other dimensions");

        // A kill in the middle of the last record loses that record only.
        let file = path(dir, "fp");
        let len = fs::metadata(&file).unwrap().len();
        fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .unwrap()
            .set_len(len - 5)
            .unwrap();
        let found = read(dir, "fp", 2);
        assert_eq!(found.len(), 2);
        assert!(!found.contains_key(&c));

        // Reopened, the torn record is cut off before new ones follow it.
        let mut journal = Journal::open(dir, "fp", 2);
        journal.append(&[(&c, &[6.0, 7.0])]);
        let found = read(dir, "fp", 2);
        assert_eq!(found.len(), 3);
        assert_eq!(found[&c], vec![6.0, 7.0]);

        // A damaged byte ends the reading there.
        let mut bytes = fs::read(&file).unwrap();
        let at = header(2).len() + record_bytes(2) + 20;
        bytes[at] ^= 0x40;
        fs::write(&file, &bytes).unwrap();
        assert_eq!(read(dir, "fp", 2).len(), 1);

        remove(dir, "fp");
        assert!(read(dir, "fp", 2).is_empty());
    }

    #[test]
    fn appending_without_reading_keeps_whole_journals_and_mends_torn_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let (a, b, c) = ([1u8; 16], [2u8; 16], [3u8; 16]);
        // None yet: started.
        Journal::open_append(dir, "fp", 2).append(&[(&a, &[1.0, 2.0])]);
        Journal::open_append(dir, "fp", 2).append(&[(&b, &[3.0, 4.0])]);
        let found = read(dir, "fp", 2);
        assert_eq!(found.len(), 2);
        assert_eq!(found[&b], vec![3.0, 4.0]);

        // Torn: rewritten from what it holds before the new record.
        let file = path(dir, "fp");
        let len = fs::metadata(&file).unwrap().len();
        fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .unwrap()
            .set_len(len - 3)
            .unwrap();
        Journal::open_append(dir, "fp", 2).append(&[(&c, &[5.0, 6.0])]);
        let found = read(dir, "fp", 2);
        assert_eq!(found.len(), 2);
        assert_eq!(found[&a], vec![1.0, 2.0]);
        assert_eq!(found[&c], vec![5.0, 6.0]);

        // Of other dimensions: started again for these.
        Journal::open_append(dir, "fp", 3).append(&[(&a, &[1.0, 2.0, 3.0])]);
        assert_eq!(read(dir, "fp", 3).len(), 1);
        assert!(read(dir, "fp", 2).is_empty());
    }
}
