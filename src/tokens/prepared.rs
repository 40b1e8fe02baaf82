//! Exact BPE counts from a vocabulary prepared once and then memory-mapped
//! from the cache folder, so that a process counting a few packs does not
//! first decode a whole vocabulary; the first time, it is prepared in
//! memory from the built-in compact form ([`Compact`]) and saved.
//!
//! Counting follows tiktoken's definition: the text is split by the
//! vocabulary's pre-tokenizer, a piece that is itself a token counts one,
//! and any other piece is merged byte pair by byte pair, always the pair
//! with the lowest rank (the leftmost on ties). Tests compare every count
//! with the `bpe-openai` library's.
//!
//! File layout (little-endian): the magic, then `tokens`, `slots` and
//! `bytes` as `u32`, the blake3 hash of everything after the header, each
//! token's start in the byte area (`tokens + 1` values), the hash table's
//! slots (a token id, or `EMPTY`), and the tokens' bytes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs;
use std::path::Path;

use regex_automata::meta::Regex;
use regex_automata::{Anchored, Input};

/// The layout's version, also in the file's name.
pub(super) const FORMAT: u32 = 2;
const MAGIC: &[u8; 8] = b"ctxbpe\x00\x02";
/// A slot holds a token id in its low bits and a tag from the token's
/// hash above them, so that most probes that miss never read a token.
const ID_BITS: u32 = 20;
const ID_MASK: u32 = (1 << ID_BITS) - 1;
const HEADER: usize = 8 + 4 * 3 + 32;
const EMPTY: u32 = u32::MAX;
/// Pieces up to this long are merged by scanning all pairs, as tiktoken
/// does; longer ones through a heap, so that a hostile run of symbols
/// costs `n log n`, not `n²`.
const SCAN_LIMIT: usize = 64;
/// Pieces whose merged counts a thread remembers before starting over.
const MERGED_LIMIT: usize = 1 << 16;

thread_local! {
    /// Counts of pieces that needed merging, keyed by the vocabulary's id
    /// and the piece (with a scratch key): words recur, and merging one
    /// takes tens of table lookups.
    static MERGED: std::cell::RefCell<MergedCounts> = std::cell::RefCell::default();
}

/// A scratch key, and the counts by vocabulary id and piece.
type MergedCounts = (Vec<u8>, rustc_hash::FxHashMap<Box<[u8]>, u32>);

/// Ids that tell prepared vocabularies apart in [`MERGED`].
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Why a vocabulary could not be prepared or opened: a file that cannot be
/// read, one that is damaged, a compact form that does not inflate, or a
/// pattern that does not compile. The built-in vocabularies never fail
/// (their tests say so); a cached file that fails is prepared again.
#[derive(Debug)]
pub(super) enum TokenizerError {
    /// A pre-tokenizer pattern that does not compile (boxed: the
    /// builder's error is large, and this one is returned often).
    Pattern(Box<regex_automata::meta::BuildError>),
    /// The prepared file could not be opened or mapped (its path is the
    /// caller's: the cache's, which a failure only makes prepare again).
    Io(std::io::Error),
    /// A prepared file that is not a layout of this version, or damaged.
    Damaged(&'static str),
    /// More tokens than the table's ids can number (`ID_MASK - 1`).
    TooManyTokens,
    /// A compact vocabulary that does not hold what its count says.
    Compact(&'static str),
    /// A compact vocabulary whose deflated part does not inflate.
    Inflate(std::io::Error),
    /// A compact vocabulary whose lengths do not add up to its bytes.
    Lengths { total: usize, bytes: usize },
}

impl std::fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenizerError::Pattern(err) => err.fmt(f),
            TokenizerError::Io(err) => err.fmt(f),
            TokenizerError::Damaged(why) | TokenizerError::Compact(why) => f.write_str(why),
            TokenizerError::TooManyTokens => f.write_str("too many tokens for the table"),
            TokenizerError::Inflate(err) => write!(f, "cannot inflate: {err}"),
            TokenizerError::Lengths { total, bytes } => {
                write!(
                    f,
                    "the tokens' lengths add up to {total} bytes, not {bytes}"
                )
            }
        }
    }
}

impl std::error::Error for TokenizerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TokenizerError::Pattern(err) => Some(err.as_ref()),
            TokenizerError::Io(err) | TokenizerError::Inflate(err) => Some(err),
            _ => None,
        }
    }
}

/// One vocabulary's pre-tokenizer: patterns tried at each position, the
/// flagged ones matching one look-ahead character that is not kept.
pub(super) struct Splitter {
    patterns: Regex,
    lookahead: Vec<bool>,
}

impl Splitter {
    pub(super) fn new(patterns: &[(&str, bool)]) -> Result<Splitter, TokenizerError> {
        let sources: Vec<&str> = patterns.iter().map(|(source, _)| *source).collect();
        Ok(Splitter {
            patterns: Regex::new_many(&sources)
                .map_err(|err| TokenizerError::Pattern(Box::new(err)))?,
            lookahead: patterns.iter().map(|(_, ahead)| *ahead).collect(),
        })
    }

    /// Calls `piece` with each piece of `text`, in order.
    fn split(&self, text: &str, mut piece: impl FnMut(&[u8])) {
        let mut at = 0;
        while at < text.len() {
            let rest = &text[at..];
            let Some(found) = self.patterns.find(Input::new(rest).anchored(Anchored::Yes)) else {
                // Every character matches one of the vocabularies' patterns;
                // were one not to, it counts as a piece of its own.
                let len = rest.chars().next().map_or(1, char::len_utf8);
                piece(&rest.as_bytes()[..len]);
                at += len;
                continue;
            };
            let mut end = found.end();
            if self.lookahead[found.pattern().as_usize()] {
                end -= rest[..end].chars().next_back().map_or(0, char::len_utf8);
            }
            if end == 0 {
                // An empty piece cannot happen with these patterns; moving
                // on one character keeps the loop finite if it did.
                end = rest.chars().next().map_or(1, char::len_utf8);
            }
            piece(&rest.as_bytes()[..end]);
            at += end;
        }
    }
}

/// Where a prepared vocabulary's bytes are: mapped from the cache file, or
/// prepared in this process.
enum Layout {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Layout {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Layout::Mapped(map) => map,
            Layout::Owned(bytes) => bytes,
        }
    }
}

/// A prepared vocabulary, memory-mapped and checked, or prepared here.
pub(super) struct PreparedBpe {
    id: u64,
    map: Layout,
    slots: usize,
    starts_at: usize,
    slots_at: usize,
    bytes_at: usize,
    splitter: Splitter,
}

impl PreparedBpe {
    /// Opens the prepared vocabulary at `path`, checking its structure and
    /// hash (a damaged file is an error, never a wrong count).
    pub(super) fn open(path: &Path, splitter: Splitter) -> Result<PreparedBpe, TokenizerError> {
        let file = fs::File::open(path).map_err(TokenizerError::Io)?;
        // SAFETY: the file is only ever replaced by rename, never written
        // in place, so the mapping's bytes do not change while it is used.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(TokenizerError::Io)?;
        PreparedBpe::from_layout(Layout::Mapped(map), splitter, true)
    }

    /// Prepares the vocabulary `tokens` (by id, which is their rank) in
    /// memory.
    pub(super) fn from_tokens(
        tokens: &[&[u8]],
        splitter: Splitter,
    ) -> Result<PreparedBpe, TokenizerError> {
        // Laid out here from the tokens themselves: nothing to verify.
        PreparedBpe::from_layout(Layout::Owned(layout(tokens)?), splitter, false)
    }

    /// Saves this vocabulary's layout to `path` (where [`Self::open`] reads
    /// it), through a temporary file renamed into place.
    pub(super) fn save(&self, path: &Path) -> std::io::Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir)?;
        crate::safe_fs::write_atomic(path, &self.map)
    }

    /// Reads the header of `map`; `verify` checks the hash and every
    /// offset too (a file may be damaged; a layout made here is not).
    fn from_layout(
        map: Layout,
        splitter: Splitter,
        verify: bool,
    ) -> Result<PreparedBpe, TokenizerError> {
        let header = map
            .get(..HEADER)
            .ok_or(TokenizerError::Damaged("too short"))?;
        if &header[..8] != MAGIC {
            return Err(TokenizerError::Damaged(
                "not a prepared vocabulary of this version",
            ));
        }
        let word = |at: usize| {
            u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
                as usize
        };
        let (tokens, slots, bytes) = (word(8), word(12), word(16));
        let starts_at = HEADER;
        let slots_at = starts_at + 4 * (tokens + 1);
        let bytes_at = slots_at + 4 * slots;
        if !slots.is_power_of_two() || slots <= tokens || bytes_at + bytes != map.len() {
            return Err(TokenizerError::Damaged("sizes do not add up"));
        }
        if verify && blake3::hash(&map[HEADER..]).as_bytes() != &header[20..52] {
            return Err(TokenizerError::Damaged("damaged (hash mismatch)"));
        }
        let prepared = PreparedBpe {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            map,
            slots,
            starts_at,
            slots_at,
            bytes_at,
            splitter,
        };
        if verify && !prepared.offsets_in_range(tokens, slots, bytes) {
            return Err(TokenizerError::Damaged("damaged (offsets out of range)"));
        }
        Ok(prepared)
    }

    /// True when the tokens' starts are in order and end at the byte
    /// area's end, and every slot is empty or holds a token's id.
    fn offsets_in_range(&self, tokens: usize, slots: usize, bytes: usize) -> bool {
        (0..tokens).all(|id| self.start(id) < self.start(id + 1))
            && self.start(tokens) == bytes
            && (0..slots).all(|slot| {
                let value = self.slot(slot);
                value == EMPTY || ((value & ID_MASK) as usize) < tokens
            })
    }

    pub(super) fn count(&self, text: &str) -> usize {
        let mut count = 0;
        self.splitter
            .split(text, |piece| count += self.count_piece(piece));
        count
    }

    fn word(&self, at: usize) -> u32 {
        let bytes = &self.map[at..at + 4];
        u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
    }

    fn start(&self, id: usize) -> usize {
        self.word(self.starts_at + 4 * id) as usize
    }

    fn slot(&self, slot: usize) -> u32 {
        self.word(self.slots_at + 4 * slot)
    }

    fn token(&self, id: usize) -> &[u8] {
        &self.map[self.bytes_at + self.start(id)..self.bytes_at + self.start(id + 1)]
    }

    /// The rank (id) of the token spelled `bytes`, if it is one.
    fn rank(&self, bytes: &[u8]) -> Option<u32> {
        let mask = self.slots - 1;
        let hashed = hash(bytes);
        let wanted = tag(hashed);
        let mut slot = hashed as usize & mask;
        loop {
            let value = self.slot(slot);
            if value == EMPTY {
                return None;
            }
            if value & !ID_MASK == wanted {
                let id = value & ID_MASK;
                if self.token(id as usize) == bytes {
                    return Some(id);
                }
            }
            slot = (slot + 1) & mask;
        }
    }

    fn count_piece(&self, piece: &[u8]) -> usize {
        if piece.len() <= 1 || self.rank(piece).is_some() {
            return piece.len().min(1);
        }
        // Only short pieces are remembered: words recur, and a hostile text
        // of long distinct pieces must not fill memory.
        if piece.len() > SCAN_LIMIT {
            return self.merge_by_heap(piece);
        }
        MERGED.with_borrow_mut(|(key, counts)| {
            key.clear();
            key.extend_from_slice(&self.id.to_le_bytes());
            key.extend_from_slice(piece);
            if let Some(&count) = counts.get(key.as_slice()) {
                return count as usize;
            }
            let count = self.merge_by_scanning(piece);
            if counts.len() >= MERGED_LIMIT {
                counts.clear();
            }
            counts.insert(key.as_slice().into(), count as u32);
            count
        })
    }

    /// tiktoken's merge: `bounds` are the parts' starts and the end; each
    /// step merges the lowest-ranked adjacent pair.
    fn merge_by_scanning(&self, piece: &[u8]) -> usize {
        let mut bounds: Vec<usize> = (0..=piece.len()).collect();
        let pair_rank = |bounds: &[usize], i: usize| -> u32 {
            match bounds.get(i + 2) {
                Some(&end) => self.rank(&piece[bounds[i]..end]).unwrap_or(EMPTY),
                None => EMPTY,
            }
        };
        let mut ranks: Vec<u32> = (0..bounds.len() - 1)
            .map(|i| pair_rank(&bounds, i))
            .collect();
        while let Some((at, _)) = ranks
            .iter()
            .enumerate()
            .filter(|&(_, &rank)| rank != EMPTY)
            .min_by_key(|&(i, &rank)| (rank, i))
        {
            bounds.remove(at + 1);
            ranks.remove(at + 1);
            ranks[at] = pair_rank(&bounds, at);
            if at > 0 {
                ranks[at - 1] = pair_rank(&bounds, at - 1);
            }
        }
        bounds.len() - 1
    }

    /// The same merges in the same order, found through a heap of pairs
    /// keyed by (rank, start); entries whose pair has changed are skipped.
    fn merge_by_heap(&self, piece: &[u8]) -> usize {
        let n = piece.len();
        // Part `i` starts at byte `i` while alive; `next`/`prev` link the
        // live parts (`n` stands for the end); `version` counts changes
        // to the pair starting at a part.
        let mut next: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut version = vec![0u32; n];
        let mut alive = vec![true; n];
        let mut heap = BinaryHeap::new();
        let pair_end = |next: &[usize], i: usize| -> Option<usize> {
            let second = next[i];
            (second < n).then(|| next[second])
        };
        for i in 0..n {
            if let Some(end) = pair_end(&next, i)
                && let Some(rank) = self.rank(&piece[i..end])
            {
                heap.push(Reverse((rank, i, 0u32)));
            }
        }
        let mut parts = n;
        while let Some(Reverse((_, i, seen))) = heap.pop() {
            if !alive[i] || version[i] != seen {
                continue;
            }
            let gone = next[i];
            alive[gone] = false;
            next[i] = next[gone];
            if next[i] < n {
                prev[next[i]] = i;
            }
            parts -= 1;
            for part in [Some(i), (prev[i] < n).then(|| prev[i])]
                .into_iter()
                .flatten()
            {
                version[part] += 1;
                if let Some(end) = pair_end(&next, part)
                    && let Some(rank) = self.rank(&piece[part..end])
                {
                    heap.push(Reverse((rank, part, version[part])));
                }
            }
        }
        parts
    }
}

/// The file layout of the vocabulary `tokens` (by id, which is their rank).
fn layout(tokens: &[&[u8]]) -> Result<Vec<u8>, TokenizerError> {
    let count = tokens.len();
    if count >= ID_MASK as usize {
        return Err(TokenizerError::TooManyTokens);
    }
    // A quarter full: a miss, the common case when merging, ends after
    // about one probe.
    let slots = (count * 4 + 1).next_power_of_two();
    let mut starts = Vec::with_capacity(count + 1);
    let mut bytes = Vec::new();
    let mut table = vec![EMPTY; slots];
    for (id, token) in tokens.iter().enumerate() {
        starts.push(bytes.len() as u32);
        let hashed = hash(token);
        let mut slot = hashed as usize & (slots - 1);
        while table[slot] != EMPTY {
            slot = (slot + 1) & (slots - 1);
        }
        table[slot] = id as u32 | tag(hashed);
        bytes.extend_from_slice(token);
    }
    starts.push(bytes.len() as u32);
    let mut body = Vec::with_capacity(4 * (starts.len() + slots) + bytes.len());
    for value in starts.iter().chain(&table) {
        body.extend_from_slice(&value.to_le_bytes());
    }
    body.extend_from_slice(&bytes);
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(MAGIC);
    for value in [count, slots, bytes.len()] {
        out.extend_from_slice(&(value as u32).to_le_bytes());
    }
    out.extend_from_slice(blake3::hash(&body).as_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// A vocabulary inflated from its compact form (written by build.rs): the
/// token count as a little-endian `u32`, then, deflated, one length byte
/// per token followed by all the tokens' bytes.
pub(super) struct Compact {
    count: usize,
    plain: Vec<u8>,
}

impl Compact {
    pub(super) fn inflate(compact: &[u8]) -> Result<Compact, TokenizerError> {
        use std::io::Read;
        let (count, deflated) = compact
            .split_first_chunk::<4>()
            .ok_or(TokenizerError::Compact("no token count"))?;
        let count = u32::from_le_bytes(*count) as usize;
        let mut plain = Vec::new();
        flate2::read::DeflateDecoder::new(deflated)
            .read_to_end(&mut plain)
            .map_err(TokenizerError::Inflate)?;
        let lengths = plain
            .get(..count)
            .ok_or(TokenizerError::Compact("fewer lengths than tokens"))?;
        let total: usize = lengths.iter().map(|&len| usize::from(len)).sum();
        if count + total != plain.len() {
            return Err(TokenizerError::Lengths {
                total,
                bytes: plain.len() - count,
            });
        }
        Ok(Compact { count, plain })
    }

    /// The tokens by id.
    pub(super) fn tokens(&self) -> Vec<&[u8]> {
        let (lengths, mut bytes) = self.plain.split_at(self.count);
        lengths
            .iter()
            .map(|&len| {
                let (token, rest) = bytes.split_at(usize::from(len));
                bytes = rest;
                token
            })
            .collect()
    }
}

/// The tag bits of a slot: the hash's top bits, independent of the low
/// bits that chose the slot.
fn tag(hashed: u64) -> u32 {
    ((hashed >> (32 + ID_BITS)) as u32) << ID_BITS
}

/// A fixed hash of a token's bytes (it is stored in the file, so it must
/// not depend on the build or the process).
fn hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = bytes.len() as u64;
    for chunk in bytes.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    }
    h ^ (h >> 29)
}

#[cfg(test)]
mod tests {
    use std::sync::LazyLock;

    use super::*;
    use crate::tokens::{CL100K_PATTERNS, O200K_PATTERNS};

    const O200K_COMPACT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k.vocab"));
    const CL100K_COMPACT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cl100k.vocab"));

    /// Both built-in vocabularies prepared as a process does the first
    /// time: o200k saved and read back from a folder kept for the test
    /// process (a later process's path), cl100k as prepared in memory.
    static PREPARED: LazyLock<(tempfile::TempDir, [PreparedBpe; 2])> = LazyLock::new(|| {
        let dir = tempfile::tempdir().unwrap();
        let prepare = |compact: &[u8], patterns: &[(&str, bool)]| {
            let compact = Compact::inflate(compact).unwrap();
            PreparedBpe::from_tokens(&compact.tokens(), Splitter::new(patterns).unwrap()).unwrap()
        };
        let path = dir.path().join("o200k");
        prepare(O200K_COMPACT, &O200K_PATTERNS).save(&path).unwrap();
        let o200k = PreparedBpe::open(&path, Splitter::new(&O200K_PATTERNS).unwrap()).unwrap();
        assert!(matches!(o200k.map, Layout::Mapped(_)));
        let cl100k = prepare(CL100K_COMPACT, &CL100K_PATTERNS);
        (dir, [o200k, cl100k])
    });

    #[test]
    fn the_built_in_vocabularies_are_the_librarys() {
        for (compact, library, count) in [
            (O200K_COMPACT, bpe_openai::o200k_base(), 199_998),
            (CL100K_COMPACT, bpe_openai::cl100k_base(), 100_256),
        ] {
            let compact = Compact::inflate(compact).unwrap();
            let tokens = compact.tokens();
            assert_eq!(tokens.len(), count);
            assert_eq!(library.bpe.num_tokens(), count);
            for (id, token) in tokens.iter().enumerate() {
                assert_eq!(*token, library.bpe.token_bytes(id as u32), "token {id}");
            }
        }
    }

    #[test]
    fn a_damaged_compact_vocabulary_is_refused() {
        let tokens: [&[u8]; 3] = [b"a", b"bc", b""];
        let compact = |count: u32, plain: &[u8]| {
            let mut out = count.to_le_bytes().to_vec();
            let mut encoder =
                flate2::write::DeflateEncoder::new(&mut out, flate2::Compression::best());
            std::io::Write::write_all(&mut encoder, plain).unwrap();
            encoder.finish().unwrap();
            out
        };
        let good = compact(3, b"\x01\x02\x00abc");
        assert_eq!(Compact::inflate(&good).unwrap().tokens(), tokens);
        let err = |bytes: &[u8]| Compact::inflate(bytes).err().unwrap().to_string();
        assert_eq!(err(&good[..3]), "no token count");
        assert!(err(&good[..good.len() - 2]).starts_with("cannot inflate: "));
        let inflate = Compact::inflate(&good[..good.len() - 2]).err().unwrap();
        let source = std::error::Error::source(&inflate).expect("the inflater's error");
        assert_eq!(inflate.to_string(), format!("cannot inflate: {source}"));
        assert_eq!(
            err(&compact(4, b"\x01\x02\x00")),
            "fewer lengths than tokens"
        );
        assert_eq!(
            err(&compact(3, b"\x01\x02\x00abcd")),
            "the tokens' lengths add up to 3 bytes, not 4"
        );
    }

    fn assert_counts_as_the_library(text: &str) {
        let libraries = [bpe_openai::o200k_base(), bpe_openai::cl100k_base()];
        for (prepared, library) in PREPARED.1.iter().zip(libraries) {
            assert_eq!(prepared.count(text), library.count(text), "{text:?}");
        }
    }

    #[test]
    fn counts_equal_the_librarys_on_varied_text() {
        let long_symbols = "-=*".repeat(400);
        let long_word = "pneumonoultramicroscopic".repeat(30);
        let texts = [
            "",
            "hello world",
            "# Context Pack: raft\n# Budget: 100 tokens\n\n---\n## [[concepts/raft]]\n",
            "Don't stop: it's what we'll do, they've said; I'm sure you'd agree.",
            "分布式事务的两阶段提交协议，以及它的失败模式。",
            "日本語の文章とカタカナ、ひらがな。한국어 문장도 있습니다.",
            "   leading spaces\n\n\n   \t\ttabs and trailing   ",
            "fn main() { let x = vec![1, 2, 3]; println!(\"{x:?}\"); }",
            "numbers 1234567890 and 3.14159 and 1,000,000",
            "emoji 😀🎉👍🏽 and combining é vs é",
            "URLs https://example.com/a/b?c=d&e=f and paths /usr/local/bin/",
            &long_symbols,
            &long_word,
            "\r\n\r\nwindows\r\nlines\r\n",
            "ÀÉÎÕÜ àéîõü ßẞ ǅ ǈ",
        ];
        for text in texts {
            assert_counts_as_the_library(text);
        }
    }

    proptest::proptest! {
        #[test]
        fn counts_equal_the_librarys_on_any_text(
            text in "[a-zA-Z0-9 \n\t'.,!?/_()\\-é中文字😀ー]{0,160}"
        ) {
            assert_counts_as_the_library(&text);
        }

        #[test]
        fn long_pieces_merge_as_short_ones_do(word in "[a-z]{65,300}") {
            let prepared = &PREPARED.1[0];
            let piece = word.as_bytes();
            proptest::prop_assert_eq!(prepared.merge_by_heap(piece), prepared.merge_by_scanning(piece));
        }
    }

    #[test]
    fn a_damaged_or_cut_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v");
        let tokens: [&[u8]; 4] = [b"a", b"b", b"ab", b"abab"];
        let splitter = || Splitter::new(&[("\\S+|\\s+", false)]).unwrap();
        let owned = PreparedBpe::from_tokens(&tokens, splitter()).unwrap();
        assert_eq!(owned.count("abab ab ba"), 6);
        owned.save(&path).unwrap();
        let prepared = PreparedBpe::open(&path, splitter()).unwrap();
        // abab, " ", ab, " ", then b and a (no token `ba`).
        assert_eq!(prepared.count("abab ab ba"), 6);
        let bytes = fs::read(&path).unwrap();
        for at in [0, 9, 30, HEADER + 3, bytes.len() - 1] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            fs::write(&path, &damaged).unwrap();
            assert!(PreparedBpe::open(&path, splitter()).is_err(), "byte {at}");
        }
        fs::write(&path, &bytes[..bytes.len() - 2]).unwrap();
        let cut = PreparedBpe::open(&path, splitter()).err().unwrap();
        assert_eq!(cut.to_string(), "sizes do not add up");
        assert!(std::error::Error::source(&cut).is_none());
    }

    #[test]
    fn a_file_that_cannot_be_opened_carries_the_systems_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.bin");
        let splitter = Splitter::new(&[("\\S+|\\s+", false)]).unwrap();
        let err = PreparedBpe::open(&missing, splitter).err().unwrap();
        let TokenizerError::Io(source) = &err else {
            panic!("{err:?}");
        };
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        let source = std::error::Error::source(&err).expect("the I/O error");
        assert_eq!(err.to_string(), source.to_string());
        let err = Splitter::new(&[("(", false)]).err().unwrap();
        assert!(matches!(err, TokenizerError::Pattern(_)), "{err:?}");
        assert!(std::error::Error::source(&err).is_some());
    }
}
