//! Every note's metadata and match keys as the catalog stores them, read
//! in place from its bytes: a note's metadata is decoded the first time
//! something asks for it, and the match keys are never decoded at all, so
//! a command pays for the notes it touches rather than for the vault.
//!
//! Both tables are also built from values (an in-memory vault, a store's
//! snapshot); then nothing is encoded.

use std::fmt;
use std::ops::{Index, Range};
use std::sync::{Arc, OnceLock};

use crate::note::{MatchKeys, NoteMeta, SummarySource, TitleSource, UpdatedSource};

/// The bytes the tables of one catalog are cut from.
pub(crate) type Blob = Arc<BlobBytes>;

/// A blob in memory, or a file mapped (read in place: no copy, and only
/// the pages touched are read).
pub(crate) enum BlobBytes {
    Owned(Vec<u8>),
    Mapped(memmap2::Mmap),
}

impl std::ops::Deref for BlobBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            BlobBytes::Owned(bytes) => bytes,
            BlobBytes::Mapped(map) => map,
        }
    }
}

impl From<Vec<u8>> for BlobBytes {
    fn from(bytes: Vec<u8>) -> Self {
        BlobBytes::Owned(bytes)
    }
}

/// Why a table's bytes were refused (the catalog holding them is damaged):
/// what was wrong, and where. The messages are the catalog's error text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TableError {
    /// The table's part lies outside the blob.
    PartOutOfRange,
    /// Too few bytes for the leading count.
    NoCount,
    /// A count so large its layout overflows.
    BadCount,
    /// The bytes end before `0` (offsets, records, ends, names) do.
    CutShort(&'static str),
    /// Offset `index` (`value`) decreases or points past the end.
    OffsetOutOfOrder { index: usize, value: usize },
    /// The text area is not UTF-8.
    NotUtf8(std::str::Utf8Error),
    /// The end of `what` (a string, a name) number `index` splits a
    /// character.
    SplitCharacter { what: &'static str, index: usize },
    /// Note `0`'s strings do not follow the previous note's.
    StringsOutOfOrder(usize),
    /// Note `0`'s strings run past the last string.
    StringsPastEnd(usize),
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableError::PartOutOfRange => f.write_str("part out of range"),
            TableError::NoCount => f.write_str("no count"),
            TableError::BadCount => f.write_str("bad count"),
            TableError::CutShort(what) => write!(f, "{what} cut short"),
            TableError::OffsetOutOfOrder { index, value } => {
                write!(f, "offset {index} out of order ({value})")
            }
            TableError::NotUtf8(err) => err.fmt(f),
            TableError::SplitCharacter { what, index } => {
                write!(f, "{what} {index} ends inside a character")
            }
            TableError::StringsOutOfOrder(note) => {
                write!(f, "note {note}'s strings are out of order")
            }
            TableError::StringsPastEnd(note) => write!(f, "note {note} has strings past the end"),
        }
    }
}

impl std::error::Error for TableError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TableError::NotUtf8(err) => Some(err),
            _ => None,
        }
    }
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let word: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(word))
}

/// The first of `0..len` for which `before` is false (`before` holds for
/// a prefix of the range).
fn partition(len: usize, before: impl Fn(usize) -> bool) -> usize {
    let (mut low, mut high) = (0, len);
    while low < high {
        let mid = low + (high - low) / 2;
        if before(mid) {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    low
}

fn push_u32(out: &mut Vec<u8>, value: usize) {
    out.extend_from_slice(&(value as u32).to_le_bytes());
}

/// Reads `count` little-endian `u32`s at `at`, checked to be a
/// non-decreasing sequence ending at most at `limit`.
fn check_offsets(bytes: &[u8], at: usize, count: usize, limit: usize) -> Result<(), TableError> {
    let mut last = 0;
    for i in 0..count {
        let value = u32_at(bytes, at + 4 * i).ok_or(TableError::CutShort("offsets"))? as usize;
        if value < last || value > limit {
            return Err(TableError::OffsetOutOfOrder { index: i, value });
        }
        last = value;
    }
    Ok(())
}

/// Every note's [`NoteMeta`], in path order.
#[derive(Clone, Default)]
pub struct MetaTable {
    /// Boxed, so that a table of notes never decoded costs a pointer each.
    slots: Vec<OnceLock<Box<NoteMeta>>>,
    encoded: Option<EncodedMetas>,
}

/// `count`, `count + 1` record offsets, then the postcard records.
#[derive(Clone)]
struct EncodedMetas {
    blob: Blob,
    offsets: usize,
    records: Range<usize>,
}

impl MetaTable {
    pub fn new(metas: Vec<NoteMeta>) -> MetaTable {
        MetaTable {
            slots: metas
                .into_iter()
                .map(|meta| OnceLock::from(Box::new(meta)))
                .collect(),
            encoded: None,
        }
    }

    /// The table in the layout [`decode`](Self::decode) reads.
    pub fn encode(&self) -> Result<Vec<u8>, postcard::Error> {
        let mut records = Vec::new();
        let mut ends = Vec::with_capacity(self.len());
        for meta in self.iter() {
            records.extend_from_slice(&postcard::to_allocvec(meta)?);
            ends.push(records.len());
        }
        let mut out = Vec::with_capacity(8 + 4 * ends.len() + records.len());
        push_u32(&mut out, self.len());
        push_u32(&mut out, 0);
        for end in ends {
            push_u32(&mut out, end);
        }
        out.extend_from_slice(&records);
        Ok(out)
    }

    /// The table over `part` of `blob`: only its offsets are checked here;
    /// records are decoded when asked for.
    pub(crate) fn decode(blob: Blob, part: Range<usize>) -> Result<MetaTable, TableError> {
        let bytes = blob.get(part.clone()).ok_or(TableError::PartOutOfRange)?;
        let count = u32_at(bytes, 0).ok_or(TableError::NoCount)? as usize;
        let records_at = 4usize
            .checked_add(
                count
                    .checked_add(1)
                    .and_then(|n| n.checked_mul(4))
                    .ok_or(TableError::BadCount)?,
            )
            .filter(|&at| at <= bytes.len())
            .ok_or(TableError::CutShort("offsets"))?;
        let records_len = bytes.len() - records_at;
        check_offsets(bytes, 4, count + 1, records_len)?;
        if u32_at(bytes, 4 + 4 * count) != Some(records_len as u32) {
            return Err(TableError::CutShort("records"));
        }
        Ok(MetaTable {
            slots: (0..count).map(|_| OnceLock::new()).collect(),
            encoded: Some(EncodedMetas {
                offsets: part.start + 4,
                records: part.start + records_at..part.end,
                blob,
            }),
        })
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// How many notes have been decoded so far (all, for a table built
    /// from values).
    pub fn decoded(&self) -> usize {
        self.slots
            .iter()
            .filter(|slot| slot.get().is_some())
            .count()
    }

    pub fn get(&self, idx: usize) -> Option<&NoteMeta> {
        let slot = self.slots.get(idx)?;
        Some(slot.get_or_init(|| Box::new(self.decode_one(idx))))
    }

    /// A record of a table whose offsets were checked and whose blob's hash
    /// matched: it decodes, unless the index was written by a build with
    /// another layout under the same format version. Such a record reads as
    /// a note with no name, never as a panic.
    fn decode_one(&self, idx: usize) -> NoteMeta {
        let decoded = self.encoded.as_ref().and_then(|encoded| {
            let start = u32_at(&encoded.blob, encoded.offsets + 4 * idx)? as usize;
            let end = u32_at(&encoded.blob, encoded.offsets + 4 * (idx + 1))? as usize;
            let records = encoded.blob.get(encoded.records.clone())?;
            postcard::from_bytes(records.get(start..end)?).ok()
        });
        decoded.unwrap_or_else(|| NoteMeta {
            path: String::new(),
            title: String::new(),
            title_source: TitleSource::FileName,
            aliases: Vec::new(),
            tags: Vec::new(),
            summary: String::new(),
            summary_source: SummarySource::None,
            tier: Default::default(),
            updated: None,
            updated_source: UpdatedSource::Unknown,
            daily: None,
            link_lists: 0,
        })
    }

    /// Every note, in order (decoding those not decoded yet).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &NoteMeta> + DoubleEndedIterator + Clone {
        (0..self.len()).map(|idx| &self[idx])
    }

    /// Where `path` is among the notes (sorted by path), as
    /// `slice::binary_search` answers, decoding only the notes it visits.
    pub fn search_path(&self, path: &str) -> Result<usize, usize> {
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let mid = low + (high - low) / 2;
            match self[mid].path.as_str().cmp(path) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(low)
    }

    /// The note at `path`.
    pub fn position(&self, path: &str) -> Option<usize> {
        self.search_path(path).ok()
    }
}

impl Index<usize> for MetaTable {
    type Output = NoteMeta;

    fn index(&self, idx: usize) -> &NoteMeta {
        match self.get(idx) {
            Some(meta) => meta,
            None => panic!("note {idx} of {}", self.len()),
        }
    }
}

impl PartialEq for MetaTable {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for MetaTable {}

impl fmt::Debug for MetaTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Every note's folded [`MatchKeys`], read in place: a note's names, tags,
/// summary and description are slices of one text.
///
/// Layout: `notes`, then per note (`first string`, `names`, `tags`) as
/// `u32, u16, u16`; `strings`, then each string's end offset; then the
/// text. A note's strings are its names, its tags, its summary and its
/// description, in that order.
#[derive(Clone)]
pub struct KeysTable {
    blob: Blob,
    notes: usize,
    records: usize,
    ends: usize,
    strings: usize,
    text: Range<usize>,
}

/// One note's keys, borrowed from the table.
#[derive(Clone, Copy)]
pub struct NoteKeys<'a> {
    table: &'a KeysTable,
    first: usize,
    names: usize,
    tags: usize,
}

impl<'a> NoteKeys<'a> {
    /// Title, then aliases.
    pub fn names(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        let (table, first) = (self.table, self.first);
        (first..first + self.names).map(move |k| table.string(k))
    }

    pub fn tags(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        let (table, first) = (self.table, self.first + self.names);
        (first..first + self.tags).map(move |k| table.string(k))
    }

    pub fn summary(&self) -> &'a str {
        self.table.string(self.first + self.names + self.tags)
    }

    pub fn description(&self) -> &'a str {
        self.table.string(self.first + self.names + self.tags + 1)
    }
}

impl KeysTable {
    pub fn new(keys: &[MatchKeys]) -> KeysTable {
        let bytes = Self::encode(keys);
        let len = bytes.len();
        // Bytes just encoded from values always read back.
        Self::decode(Arc::new(bytes.into()), 0..len).unwrap_or_else(|_| KeysTable::empty())
    }

    fn empty() -> KeysTable {
        KeysTable {
            blob: Arc::new(vec![0; 8].into()),
            notes: 0,
            records: 4,
            ends: 8,
            strings: 0,
            text: 8..8,
        }
    }

    pub fn encode(keys: &[MatchKeys]) -> Vec<u8> {
        let mut records = Vec::with_capacity(8 * keys.len());
        let mut ends = Vec::new();
        let mut text = String::new();
        for note in keys {
            push_u32(&mut records, ends.len());
            let names = note.names.len().min(u16::MAX as usize);
            let tags = note.tags.len().min(u16::MAX as usize);
            records.extend_from_slice(&(names as u16).to_le_bytes());
            records.extend_from_slice(&(tags as u16).to_le_bytes());
            let strings = note.names[..names]
                .iter()
                .chain(&note.tags[..tags])
                .chain([&note.summary, &note.description]);
            for string in strings {
                text.push_str(string);
                ends.push(text.len());
            }
        }
        let mut out = Vec::with_capacity(8 + records.len() + 4 * ends.len() + text.len());
        push_u32(&mut out, keys.len());
        out.extend_from_slice(&records);
        push_u32(&mut out, ends.len());
        for end in ends {
            push_u32(&mut out, end);
        }
        out.extend_from_slice(text.as_bytes());
        out
    }

    /// The table over `part` of `blob`, its offsets and text checked.
    pub(crate) fn decode(blob: Blob, part: Range<usize>) -> Result<KeysTable, TableError> {
        let bytes = blob.get(part.clone()).ok_or(TableError::PartOutOfRange)?;
        let notes = u32_at(bytes, 0).ok_or(TableError::NoCount)? as usize;
        let ends_at = notes
            .checked_mul(8)
            .and_then(|n| n.checked_add(4))
            .ok_or(TableError::BadCount)?;
        let strings = u32_at(bytes, ends_at).ok_or(TableError::CutShort("records"))? as usize;
        let text_at = strings
            .checked_mul(4)
            .and_then(|n| n.checked_add(ends_at + 4))
            .filter(|&at| at <= bytes.len())
            .ok_or(TableError::CutShort("ends"))?;
        let text = std::str::from_utf8(&bytes[text_at..]).map_err(TableError::NotUtf8)?;
        check_offsets(bytes, ends_at + 4, strings, text.len())?;
        for i in 0..strings {
            let end = u32_at(bytes, ends_at + 4 + 4 * i).unwrap_or(0) as usize;
            if !text.is_char_boundary(end) {
                return Err(TableError::SplitCharacter {
                    what: "string",
                    index: i,
                });
            }
        }
        // Notes' strings follow each other without gaps, which lets a
        // position in the text be mapped back to its note.
        let mut expected_first = 0usize;
        for note in 0..notes {
            let at = 4 + 8 * note;
            let first = u32_at(bytes, at).unwrap_or(u32::MAX) as usize;
            let count = usize::from(u16::from_le_bytes([bytes[at + 4], bytes[at + 5]]))
                + usize::from(u16::from_le_bytes([bytes[at + 6], bytes[at + 7]]))
                + 2;
            if first != expected_first {
                return Err(TableError::StringsOutOfOrder(note));
            }
            expected_first = first + count;
            if expected_first > strings {
                return Err(TableError::StringsPastEnd(note));
            }
        }
        Ok(KeysTable {
            notes,
            records: part.start + 4,
            ends: part.start + ends_at + 4,
            strings,
            text: part.start + text_at..part.end,
            blob,
        })
    }

    pub fn len(&self) -> usize {
        self.notes
    }

    /// The table's bytes, in the layout [`decode`](Self::decode) reads.
    pub fn encoded(&self) -> &[u8] {
        &self.blob[self.records - 4..self.text.end]
    }

    pub fn is_empty(&self) -> bool {
        self.notes == 0
    }

    pub fn note(&self, idx: usize) -> Option<NoteKeys<'_>> {
        if idx >= self.notes {
            return None;
        }
        let at = self.records + 8 * idx;
        let record = self.blob.get(at..at + 8)?;
        Some(NoteKeys {
            table: self,
            first: u32::from_le_bytes([record[0], record[1], record[2], record[3]]) as usize,
            names: usize::from(u16::from_le_bytes([record[4], record[5]])),
            tags: usize::from(u16::from_le_bytes([record[6], record[7]])),
        })
    }

    pub fn iter(&self) -> impl Iterator<Item = NoteKeys<'_>> {
        (0..self.notes).filter_map(|idx| self.note(idx))
    }

    /// The notes, ascending, with a string in which one of `terms` occurs
    /// where `accept` (given the string and the occurrence's range in it)
    /// allows: found in one scan of the table's text rather than note by
    /// note. `find(text, from)` gives the leftmost occurrence of any term
    /// at or after `from`: its start and the term's index.
    pub fn notes_holding(
        &self,
        terms: &[String],
        find: impl Fn(&str, usize) -> Option<(usize, usize)>,
        accept: impl Fn(&str, Range<usize>) -> bool,
    ) -> Vec<usize> {
        let text = self.text();
        let mut notes = Vec::new();
        let mut from = 0;
        while from < text.len() {
            let Some((at, pattern)) = find(text, from) else {
                break;
            };
            let string = self.string_at(at);
            let bounds = self.string_start(string)..self.string_start(string + 1);
            // Nothing occurs before `at`; any term starting there may be
            // the one that counts (the automaton reports only the first).
            let holds = |term: &String| {
                !term.is_empty()
                    && at + term.len() <= bounds.end
                    && text[at..].starts_with(term.as_str())
                    && accept(
                        &text[bounds.clone()],
                        at - bounds.start..at - bounds.start + term.len(),
                    )
            };
            if terms.get(pattern).is_some_and(holds) || terms.iter().any(holds) {
                let note = self.note_of(string);
                notes.push(note);
                from = self.note_text_start(note + 1).max(at + 1);
            } else {
                from = at + 1;
            }
        }
        notes
    }

    /// The string holding byte `at` of the text (the non-empty one, where
    /// empty strings end at the same place).
    fn string_at(&self, at: usize) -> usize {
        let end_of = |k: usize| u32_at(&self.blob, self.ends + 4 * k).unwrap_or(0) as usize;
        partition(self.strings, |k| end_of(k) <= at).min(self.strings.saturating_sub(1))
    }

    /// Where string `k` starts in the text (the text's end past the last).
    fn string_start(&self, k: usize) -> usize {
        match k {
            0 => 0,
            k if k > self.strings => self.text.len(),
            k => u32_at(&self.blob, self.ends + 4 * (k - 1)).unwrap_or(0) as usize,
        }
    }

    /// The note whose strings include string `k`.
    fn note_of(&self, k: usize) -> usize {
        let first_of =
            |note: usize| u32_at(&self.blob, self.records + 8 * note).unwrap_or(0) as usize;
        partition(self.notes, |note| first_of(note) <= k).saturating_sub(1)
    }

    /// Where note `note`'s first string starts in the text (the text's
    /// end past the last note).
    fn note_text_start(&self, note: usize) -> usize {
        if note >= self.notes {
            return self.text.len();
        }
        let first = u32_at(&self.blob, self.records + 8 * note).unwrap_or(0) as usize;
        if first == 0 {
            0
        } else {
            u32_at(&self.blob, self.ends + 4 * (first - 1)).unwrap_or(0) as usize
        }
    }

    fn text(&self) -> &str {
        // SAFETY: `decode` checked these bytes are UTF-8, and the blob is
        // never written after that.
        unsafe { std::str::from_utf8_unchecked(&self.blob[self.text.clone()]) }
    }

    /// String `k`: its end offsets were checked to be in order and on
    /// character boundaries.
    fn string(&self, k: usize) -> &str {
        if k >= self.strings {
            return "";
        }
        let end_of = |k: usize| u32_at(&self.blob, self.ends + 4 * k).unwrap_or(0) as usize;
        let start = if k == 0 { 0 } else { end_of(k - 1) };
        self.text().get(start..end_of(k)).unwrap_or("")
    }
}

impl fmt::Debug for KeysTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeysTable({} notes)", self.notes)
    }
}

impl PartialEq for KeysTable {
    fn eq(&self, other: &Self) -> bool {
        self.encoded() == other.encoded()
    }
}

impl Eq for KeysTable {}

impl Default for KeysTable {
    fn default() -> Self {
        KeysTable::empty()
    }
}

/// Names, each with the note it stands for, sorted by name and read in
/// place: the link resolver's lookups, stored with the catalog so that a
/// command resolving a few links does not first index every note's names.
///
/// Layout: `count`, then each name's end offset, then each note index
/// (`u32`s), then the names' text.
#[derive(Clone)]
pub(crate) struct NameTable {
    blob: Blob,
    count: usize,
    ends: usize,
    values: usize,
    text: Range<usize>,
}

impl NameTable {
    /// The table of `pairs` (in any order; repeats kept once).
    pub(crate) fn new(mut pairs: Vec<(String, u32)>) -> NameTable {
        pairs.sort_unstable();
        pairs.dedup();
        let mut out = Vec::with_capacity(4 + 8 * pairs.len());
        push_u32(&mut out, pairs.len());
        let mut end = 0;
        for (name, _) in &pairs {
            end += name.len();
            push_u32(&mut out, end);
        }
        for (_, value) in &pairs {
            push_u32(&mut out, *value as usize);
        }
        for (name, _) in &pairs {
            out.extend_from_slice(name.as_bytes());
        }
        let len = out.len();
        // Bytes just encoded from values always read back.
        Self::decode(Arc::new(out.into()), 0..len).unwrap_or_default()
    }

    /// The table over `part` of `blob`, its offsets and text checked.
    pub(crate) fn decode(blob: Blob, part: Range<usize>) -> Result<NameTable, TableError> {
        let bytes = blob.get(part.clone()).ok_or(TableError::PartOutOfRange)?;
        let count = u32_at(bytes, 0).ok_or(TableError::NoCount)? as usize;
        let text_at = count
            .checked_mul(8)
            .and_then(|n| n.checked_add(4))
            .filter(|&at| at <= bytes.len())
            .ok_or(TableError::CutShort("offsets"))?;
        let text = std::str::from_utf8(&bytes[text_at..]).map_err(TableError::NotUtf8)?;
        check_offsets(bytes, 4, count, text.len())?;
        for i in 0..count {
            let end = u32_at(bytes, 4 + 4 * i).unwrap_or(0) as usize;
            if !text.is_char_boundary(end) {
                return Err(TableError::SplitCharacter {
                    what: "name",
                    index: i,
                });
            }
        }
        if count > 0 && u32_at(bytes, 4 + 4 * (count - 1)) != Some(text.len() as u32) {
            return Err(TableError::CutShort("names"));
        }
        Ok(NameTable {
            count,
            ends: part.start + 4,
            values: part.start + 4 + 4 * count,
            text: part.start + text_at..part.end,
            blob,
        })
    }

    /// The table's bytes, in the layout [`decode`](Self::decode) reads.
    pub(crate) fn encoded(&self) -> &[u8] {
        &self.blob[self.ends - 4..self.text.end]
    }

    fn name(&self, i: usize) -> &str {
        let end_of = |i: usize| u32_at(&self.blob, self.ends + 4 * i).unwrap_or(0) as usize;
        let start = if i == 0 { 0 } else { end_of(i - 1) };
        // SAFETY: `decode` checked the text is UTF-8; `get` checks the
        // boundaries, which `decode` checked too.
        let text = unsafe { std::str::from_utf8_unchecked(&self.blob[self.text.clone()]) };
        text.get(start..end_of(i)).unwrap_or("")
    }

    /// The notes `name` stands for, in ascending order.
    pub(crate) fn get(&self, name: &str) -> impl Iterator<Item = usize> + '_ {
        let first = self.partition(|key| key < name);
        let last = self.partition(|key| key <= name);
        (first..last).filter_map(|i| Some(u32_at(&self.blob, self.values + 4 * i)? as usize))
    }

    /// The first entry whose name does not satisfy `before` (names sorted).
    fn partition(&self, before: impl Fn(&str) -> bool) -> usize {
        let (mut low, mut high) = (0, self.count);
        while low < high {
            let mid = low + (high - low) / 2;
            if before(self.name(mid)) {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        low
    }
}

impl Default for NameTable {
    fn default() -> Self {
        NameTable {
            blob: Arc::new(vec![0; 4].into()),
            count: 0,
            ends: 4,
            values: 4,
            text: 4..4,
        }
    }
}

impl PartialEq for NameTable {
    fn eq(&self, other: &Self) -> bool {
        self.encoded() == other.encoded()
    }
}

impl Eq for NameTable {}

impl fmt::Debug for NameTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NameTable({} names)", self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::note::Tier;

    fn meta(path: &str, title: &str) -> NoteMeta {
        NoteMeta {
            path: path.into(),
            title: title.into(),
            title_source: TitleSource::Frontmatter,
            aliases: vec!["alias".into()],
            tags: vec!["t/é".into()],
            summary: "sum".into(),
            summary_source: SummarySource::Frontmatter,
            tier: Tier::Core,
            updated: Some(7),
            updated_source: UpdatedSource::Updated,
            daily: None,
            link_lists: 40,
        }
    }

    #[test]
    fn metas_read_back_one_at_a_time() {
        let metas = vec![meta("a.md", "A"), meta("b/c.md", "Ç"), meta("d.md", "")];
        let bytes = MetaTable::new(metas.clone()).encode().unwrap();
        let mut blob = vec![9u8; 3];
        blob.extend_from_slice(&bytes);
        let end = blob.len();
        let table = MetaTable::decode(Arc::new(blob.into()), 3..end).unwrap();
        assert_eq!(table.len(), 3);
        assert_eq!(table[1], metas[1]);
        assert_eq!(table.position("d.md"), Some(2));
        assert_eq!(table.position("b.md"), None);
        assert_eq!(table.iter().cloned().collect::<Vec<_>>(), metas);
        assert_eq!(table, MetaTable::new(metas));
    }

    #[test]
    fn damaged_metas_are_refused_or_read_as_nameless() {
        let bytes = MetaTable::new(vec![meta("a.md", "A")]).encode().unwrap();
        for cut in 0..bytes.len() {
            let len = bytes[..cut].len();
            assert!(MetaTable::decode(Arc::new(bytes[..cut].to_vec().into()), 0..len).is_err());
        }
        let mut damaged = bytes.clone();
        let last = damaged.len() - 1;
        damaged[12..last].fill(0xff);
        let table = MetaTable::decode(Arc::new(damaged.into()), 0..bytes.len()).unwrap();
        assert_eq!(table[0].path, "");
    }

    fn keys(names: &[&str], tags: &[&str], summary: &str, description: &str) -> MatchKeys {
        MatchKeys {
            names: names.iter().map(|s| s.to_string()).collect(),
            tags: tags.iter().map(|s| s.to_string()).collect(),
            summary: summary.into(),
            description: description.into(),
        }
    }

    #[test]
    fn keys_read_in_place() {
        let all = vec![
            keys(&["raft", "consensus"], &["db/dist"], "", "log replication"),
            keys(&[], &[], "", ""),
            keys(&["分布式"], &["a", "b"], "一致性", ""),
        ];
        let table = KeysTable::new(&all);
        assert_eq!(table.len(), 3);
        for (note, expected) in table.iter().zip(&all) {
            assert_eq!(note.names().collect::<Vec<_>>(), expected.names);
            assert_eq!(note.tags().collect::<Vec<_>>(), expected.tags);
            assert_eq!(note.summary(), expected.summary);
            assert_eq!(note.description(), expected.description);
        }
        assert!(table.note(3).is_none());
        assert_eq!(KeysTable::new(&[]).len(), 0);
        assert_eq!(table, KeysTable::new(&all));
    }

    #[test]
    fn names_find_their_notes_in_order() {
        let table = NameTable::new(vec![
            ("raft".into(), 3),
            ("paxos".into(), 1),
            ("raft".into(), 0),
            ("raft".into(), 3),
            ("共识".into(), 2),
        ]);
        assert_eq!(table.count, 4);
        assert_eq!(table.get("raft").collect::<Vec<_>>(), [0, 3]);
        assert_eq!(table.get("共识").collect::<Vec<_>>(), [2]);
        assert_eq!(table.get("paxo").count(), 0);
        assert_eq!(table.get("zzz").count(), 0);
        let bytes = table.encoded().to_vec();
        for cut in 0..bytes.len() {
            let len = bytes[..cut].len();
            assert!(NameTable::decode(Arc::new(bytes[..cut].to_vec().into()), 0..len).is_err());
        }
        assert_eq!(NameTable::new(Vec::new()).get("x").count(), 0);
    }

    #[test]
    fn damaged_keys_are_refused() {
        let bytes = KeysTable::encode(&[keys(&["ab"], &["c"], "d", "é")]);
        for cut in 0..bytes.len() {
            let len = bytes[..cut].len();
            assert!(
                KeysTable::decode(Arc::new(bytes[..cut].to_vec().into()), 0..len).is_err(),
                "{cut}"
            );
        }
        // An end offset inside the two-byte character.
        let mut damaged = bytes.clone();
        let ends = 4 + 8 + 4;
        damaged[ends + 12..ends + 16].copy_from_slice(&5u32.to_le_bytes());
        let len = damaged.len();
        let err = KeysTable::decode(Arc::new(damaged.into()), 0..len)
            .err()
            .unwrap();
        assert_eq!(
            err,
            TableError::SplitCharacter {
                what: "string",
                index: 3
            }
        );
        assert_eq!(err.to_string(), "string 3 ends inside a character");
        assert!(std::error::Error::source(&err).is_none());
    }

    #[test]
    fn a_refused_table_says_what_and_where() {
        let bytes = NameTable::new(vec![("raft".into(), 0)]).encoded().to_vec();
        let decode = |bytes: &[u8]| {
            let len = bytes.len();
            NameTable::decode(Arc::new(bytes.to_vec().into()), 0..len)
                .err()
                .unwrap()
        };
        assert_eq!(decode(&bytes[..2]).to_string(), "no count");
        assert_eq!(decode(&bytes[..6]).to_string(), "offsets cut short");
        // The text area (after the count and one end and one value) made
        // invalid UTF-8: the decoder's own error is the source.
        let mut damaged = bytes.clone();
        damaged[12] = 0xff;
        let err = decode(&damaged);
        assert!(matches!(err, TableError::NotUtf8(_)), "{err:?}");
        assert_eq!(
            err.to_string(),
            "invalid utf-8 sequence of 1 bytes from index 0"
        );
        let source = std::error::Error::source(&err).expect("the UTF-8 error");
        assert_eq!(source.to_string(), err.to_string());
    }
}
