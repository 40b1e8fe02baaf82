//! How text becomes index terms: words of alphabetic scripts are lower-cased,
//! stop words removed and English-stemmed; runs of CJK characters become
//! single characters plus overlapping character pairs, which needs no
//! dictionary and finds any Chinese or Japanese substring of two or more
//! characters.

use rustc_hash::FxHashMap;
use tantivy::tokenizer::{TextAnalyzer, Token, TokenStream, Tokenizer};

use crate::text::is_cjk;

/// The name under which the analyzer is registered with tantivy.
pub(crate) const ANALYZER: &str = "ctxpack";

/// Lucene's English stop words (as tantivy's English filter), sorted.
const STOP_WORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];
const MAX_STOP_WORD_BYTES: usize = 5;
/// Longer words are dropped (hashes, base64 and the like).
const MAX_WORD_BYTES: usize = 48;
/// The stem cache is emptied when it grows past this many words.
const STEM_CACHE_LIMIT: usize = 200_000;

/// Builds the analyzer used for every indexed text field and every query.
pub fn analyzer() -> TextAnalyzer {
    TextAnalyzer::from(MixedTokenizer::default())
}

/// The terms of `text`, in order, as the index sees them.
pub(crate) fn terms(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
    let mut stream = analyzer.token_stream(text);
    let mut terms = Vec::new();
    while stream.advance() {
        terms.push(stream.token().text.clone());
    }
    terms
}

/// Splits text into words and CJK unigrams and bigrams, and normalises the
/// words (lower case, stop words out, English stems) in the same pass,
/// remembering stems it has computed.
#[derive(Clone)]
pub(crate) struct MixedTokenizer {
    tokens: Vec<Token>,
    len: usize,
    stemmer: Stemmer,
    scratch: String,
}

#[derive(Clone)]
struct Stemmer {
    algorithm: frostem::Stemmer,
    /// Stems of ASCII words of up to [`SHORT_WORD_BYTES`], keyed by the
    /// lower-cased word packed in one number: most words of most vaults,
    /// looked up without hashing or comparing strings (that was a quarter
    /// of tokenizing a cold index).
    short: FxHashMap<u128, Box<str>>,
    cache: FxHashMap<String, String>,
    lower: String,
}

/// Longer ASCII words take the string-keyed cache.
const SHORT_WORD_BYTES: usize = 16;

impl Default for MixedTokenizer {
    fn default() -> Self {
        MixedTokenizer {
            tokens: Vec::new(),
            len: 0,
            scratch: String::new(),
            stemmer: Stemmer {
                algorithm: frostem::Stemmer::new(frostem::Algorithm::English),
                short: FxHashMap::default(),
                cache: FxHashMap::default(),
                lower: String::new(),
            },
        }
    }
}

impl Stemmer {
    /// Writes the normalised form of `word` into `out`; false for a stop
    /// word or an overlong word.
    fn normalise(&mut self, word: &str, out: &mut String) -> bool {
        if word.len() > MAX_WORD_BYTES {
            return false;
        }
        if let Some(key) = packed_lower(word.as_bytes(), 0, word.len()) {
            return self.normalise_packed(key, word.len(), out);
        }
        self.lower.clear();
        if word.is_ascii() {
            self.lower.push_str(word);
            self.lower.make_ascii_lowercase();
        } else {
            self.lower.extend(word.chars().flat_map(char::to_lowercase));
        }
        if is_stop_word(&self.lower) {
            return false;
        }
        out.clear();
        // Porter2 leaves a word of two letters or fewer as it is: no
        // lookup for the numbers and short words of every note.
        if self.lower.len() <= 2 {
            out.push_str(&self.lower);
            return true;
        }
        if let Some(stem) = self.cache.get(&self.lower) {
            out.push_str(stem);
            return true;
        }
        let stem = self.algorithm.stem(&self.lower).into_owned();
        out.push_str(&stem);
        if self.cache.len() >= STEM_CACHE_LIMIT {
            self.cache.clear();
        }
        self.cache.insert(self.lower.clone(), stem);
        true
    }

    /// [`Stemmer::normalise`] of a short ASCII word given as its
    /// [`packed_lower`] key: the same stems, through the packed cache.
    fn normalise_packed(&mut self, key: u128, len: usize, out: &mut String) -> bool {
        out.clear();
        if let Some(stem) = self.short.get(&key) {
            out.push_str(stem);
            return !stem.is_empty();
        }
        let lower = key.to_be_bytes();
        let lower = std::str::from_utf8(&lower[..len]).expect("an ASCII word");
        // A stop word is cached as an empty stem: one lookup answers both.
        let stem: Box<str> = if is_stop_word(lower) {
            "".into()
        } else if len <= 2 {
            lower.into()
        } else {
            self.algorithm.stem(lower).into()
        };
        out.push_str(&stem);
        let kept = !stem.is_empty();
        if self.short.len() >= STEM_CACHE_LIMIT {
            self.short.clear();
        }
        self.short.insert(key, stem);
        kept
    }
}

/// The word of `len` bytes at `from`, if it is ASCII letters and digits of
/// at most [`SHORT_WORD_BYTES`], lower-cased and packed big-endian and
/// zero-padded (as [`packed`]) into one number: read by one load where the
/// text goes on for 16 bytes (packing byte by byte stalled on the load
/// that read the bytes back).
fn packed_lower(bytes: &[u8], from: usize, len: usize) -> Option<u128> {
    if len == 0 || len > SHORT_WORD_BYTES {
        return None;
    }
    let raw = match bytes.get(from..from + SHORT_WORD_BYTES) {
        Some(window) => u128::from_be_bytes(window.try_into().expect("16 bytes")),
        None => {
            let mut window = [0u8; SHORT_WORD_BYTES];
            window[..len].copy_from_slice(&bytes[from..from + len]);
            u128::from_be_bytes(window)
        }
    };
    let mask = u128::MAX << (8 * (SHORT_WORD_BYTES - len));
    let word = raw & mask;
    if word & (EVERY_BYTE * 0x80) != 0 {
        return None;
    }
    // Letters and digits only, so setting each byte's 0x20 bit lower-cases
    // the capitals and leaves digits and small letters as they are.
    debug_assert!(
        bytes[from..from + len]
            .iter()
            .all(u8::is_ascii_alphanumeric)
    );
    Some(word | ((EVERY_BYTE * 0x20) & mask))
}

/// 1 in each byte of a `u128`.
const EVERY_BYTE: u128 = u128::MAX / 0xff;

/// A word of at most eight bytes as one number (its bytes, big-endian,
/// zero-padded), so that the stop-word check compares integers.
const fn packed(word: &[u8]) -> u64 {
    let mut value = 0u64;
    let mut at = 0;
    while at < 8 {
        value <<= 8;
        if at < word.len() {
            value |= word[at] as u64;
        }
        at += 1;
    }
    value
}

/// [`STOP_WORDS`] packed, in the same (sorted) order.
const PACKED_STOP_WORDS: [u64; STOP_WORDS.len()] = {
    let mut packed_words = [0u64; STOP_WORDS.len()];
    let mut at = 0;
    while at < STOP_WORDS.len() {
        packed_words[at] = packed(STOP_WORDS[at].as_bytes());
        at += 1;
    }
    packed_words
};

/// Whether a lower-cased word is a stop word: called for every word, so
/// it compares numbers rather than strings.
fn is_stop_word(word: &str) -> bool {
    word.len() <= MAX_STOP_WORD_BYTES
        && PACKED_STOP_WORDS
            .binary_search(&packed(word.as_bytes()))
            .is_ok()
}

/// Whether no term of `text` spans byte `at`, so that the terms of `text`
/// are those of `text[..at]` followed by those of `text[at..]`: a word
/// runs over letters and digits, a CJK pair over two CJK characters, and
/// nothing else carries from one character to the next.
pub(crate) fn is_clean_cut(text: &str, at: usize) -> bool {
    if !text.is_char_boundary(at) {
        return false;
    }
    let (Some(before), Some(after)) = (text[..at].chars().next_back(), text[at..].chars().next())
    else {
        return true;
    };
    let is_word = |ch: char| !is_cjk(ch) && ch.is_alphanumeric();
    !(is_word(before) && is_word(after) || is_cjk(before) && is_cjk(after))
}

pub(crate) struct MixedTokenStream<'a> {
    tokens: &'a mut [Token],
    next: usize,
}

impl MixedTokenizer {
    /// Appends a token, reusing the slot (and its string) of an earlier call.
    fn slot(&mut self, from: usize, to: usize, position: usize) -> &mut Token {
        if self.len == self.tokens.len() {
            self.tokens.push(Token::default());
        }
        let token = &mut self.tokens[self.len];
        self.len += 1;
        token.offset_from = from;
        token.offset_to = to;
        token.position = position;
        token.position_length = 1;
        token
    }

    fn push_word(&mut self, text: &str, from: usize, to: usize, position: &mut usize) {
        let mut term = std::mem::take(&mut self.scratch);
        let kept = match packed_lower(text.as_bytes(), from, to - from) {
            Some(key) => self.stemmer.normalise_packed(key, to - from, &mut term),
            None => self.stemmer.normalise(&text[from..to], &mut term),
        };
        if kept {
            let token = self.slot(from, to, *position);
            std::mem::swap(&mut token.text, &mut term);
        }
        self.scratch = term;
        *position += 1;
    }

    fn push_cjk(&mut self, text: &str, from: usize, to: usize, position: usize) {
        let token = self.slot(from, to, position);
        token.text.clear();
        token.text.push_str(&text[from..to]);
    }
}

impl Tokenizer for MixedTokenizer {
    type TokenStream<'a> = MixedTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> MixedTokenStream<'a> {
        self.len = 0;
        let mut position = 0usize;
        let mut word_start: Option<usize> = None;
        let mut previous_cjk: Option<usize> = None;
        let bytes = text.as_bytes();
        let mut offset = 0;
        while offset < bytes.len() {
            // ASCII, most of most vaults, is classified by the byte alone:
            // decoding each character and testing it against the CJK
            // ranges was a fifth of a cold index's tokenizing.
            let byte = bytes[offset];
            if byte.is_ascii() {
                previous_cjk = None;
                if byte.is_ascii_alphanumeric() {
                    word_start.get_or_insert(offset);
                } else if let Some(start) = word_start.take() {
                    self.push_word(text, start, offset, &mut position);
                }
                offset += 1;
                continue;
            }
            let ch = text[offset..].chars().next().expect("a char boundary");
            let end = offset + ch.len_utf8();
            if is_cjk(ch) {
                if let Some(start) = word_start.take() {
                    self.push_word(text, start, offset, &mut position);
                }
                if let Some(prev_offset) = previous_cjk {
                    self.push_cjk(text, prev_offset, end, position.saturating_sub(1));
                }
                self.push_cjk(text, offset, end, position);
                position += 1;
                previous_cjk = Some(offset);
                offset = end;
                continue;
            }
            previous_cjk = None;
            if ch.is_alphanumeric() {
                word_start.get_or_insert(offset);
            } else if let Some(start) = word_start.take() {
                self.push_word(text, start, offset, &mut position);
            }
            offset = end;
        }
        if let Some(start) = word_start {
            self.push_word(text, start, text.len(), &mut position);
        }
        MixedTokenStream {
            tokens: &mut self.tokens[..self.len],
            next: 0,
        }
    }
}

impl TokenStream for MixedTokenStream<'_> {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_of_two_letters_or_fewer_are_their_own_stems() {
        let stemmer = frostem::Stemmer::new(frostem::Algorithm::English);
        let letters = ('a'..='z').chain('0'..='9').chain(['é', 'ß', 'ø']);
        let mut words: Vec<String> = letters.clone().map(String::from).collect();
        for first in letters.clone() {
            words.extend(letters.clone().map(|second| format!("{first}{second}")));
        }
        for word in words.iter().filter(|w| w.len() <= 2) {
            assert_eq!(stemmer.stem(word), word.as_str());
        }
    }

    proptest::proptest! {
        #[test]
        fn a_cached_stem_is_the_stem_of_the_lower_cased_word(
            words in proptest::collection::vec("[a-zA-Z0-9éÉß]{1,20}", 1..40)
        ) {
            let algorithm = frostem::Stemmer::new(frostem::Algorithm::English);
            let mut stemmer = MixedTokenizer::default().stemmer;
            let words: Vec<String> = ["The", "AND", "a", "Running", "x9", "Leaders", "été"]
                .into_iter()
                .map(String::from)
                .chain(words)
                .collect();
            // Twice: the second round answers from the caches.
            for word in words.iter().chain(&words) {
                let lower = word.to_lowercase();
                let mut out = String::from("stale");
                let kept = stemmer.normalise(word, &mut out);
                proptest::prop_assert_eq!(kept, !is_stop_word(&lower));
                if kept {
                    proptest::prop_assert_eq!(&out, &algorithm.stem(&lower));
                }
            }
        }
    }

    #[test]
    fn english_is_stemmed_and_stop_words_dropped() {
        let mut a = analyzer();
        assert_eq!(
            terms(&mut a, "The Running of the Leaders"),
            ["run", "leader"]
        );
    }

    #[test]
    fn cjk_becomes_unigrams_and_bigrams() {
        let mut a = analyzer();
        assert_eq!(
            terms(&mut a, "分布式ok事务"),
            ["分", "分布", "布", "布式", "式", "ok", "事", "事务", "务"]
        );
    }

    proptest::proptest! {
        #[test]
        fn a_clean_cut_splits_the_terms_and_nothing_else(
            text in "[a-zA-Z0-9 .,_é日本語分布式\n-]{0,40}"
        ) {
            let mut a = analyzer();
            let whole = terms(&mut a, &text);
            for at in 0..=text.len() {
                if is_clean_cut(&text, at) {
                    let mut parts = terms(&mut a, &text[..at]);
                    parts.extend(terms(&mut a, &text[at..]));
                    proptest::prop_assert_eq!(&parts, &whole, "cut at {}", at);
                }
            }
        }
    }

    /// The tokens as a character-by-character reading gives them: the
    /// rule the byte-wise scan must keep.
    fn tokens_by_characters(text: &str) -> Vec<(String, usize, usize, usize)> {
        let mut stemmer = MixedTokenizer::default().stemmer;
        let mut tokens = Vec::new();
        let mut position = 0usize;
        let mut word_start: Option<usize> = None;
        let mut previous_cjk: Option<usize> = None;
        let mut word = |tokens: &mut Vec<_>, from: usize, to: usize, position: &mut usize| {
            let mut term = String::new();
            if stemmer.normalise(&text[from..to], &mut term) {
                tokens.push((term, from, to, *position));
            }
            *position += 1;
        };
        for (offset, ch) in text.char_indices() {
            if is_cjk(ch) {
                if let Some(start) = word_start.take() {
                    word(&mut tokens, start, offset, &mut position);
                }
                let end = offset + ch.len_utf8();
                if let Some(previous) = previous_cjk {
                    let pair = text[previous..end].to_string();
                    tokens.push((pair, previous, end, position.saturating_sub(1)));
                }
                tokens.push((text[offset..end].to_string(), offset, end, position));
                position += 1;
                previous_cjk = Some(offset);
                continue;
            }
            previous_cjk = None;
            if ch.is_alphanumeric() {
                word_start.get_or_insert(offset);
            } else if let Some(start) = word_start.take() {
                word(&mut tokens, start, offset, &mut position);
            }
        }
        if let Some(start) = word_start {
            word(&mut tokens, start, text.len(), &mut position);
        }
        tokens
    }

    proptest::proptest! {
        #[test]
        fn the_byte_scan_gives_the_tokens_of_a_character_reading(
            text in "[a-zA-Z0-9 .,_éÉßøΩ日本語分布式가\n-]{0,60}"
        ) {
            let mut a = analyzer();
            let mut stream = a.token_stream(&text);
            let mut tokens = Vec::new();
            while stream.advance() {
                let t = stream.token();
                tokens.push((t.text.clone(), t.offset_from, t.offset_to, t.position));
            }
            proptest::prop_assert_eq!(tokens, tokens_by_characters(&text));
        }
    }

    #[test]
    fn cuts_inside_a_word_or_a_cjk_run_are_not_clean() {
        assert!(!is_clean_cut("leader", 3));
        assert!(!is_clean_cut("分布式", 3));
        assert!(!is_clean_cut("分布式", 1));
        assert!(is_clean_cut("raft 分布", 4));
        assert!(is_clean_cut("raft分布", 4));
        assert!(is_clean_cut("a", 0) && is_clean_cut("a", 1));
    }

    #[test]
    fn stop_word_length_bound_holds() {
        assert!(STOP_WORDS.iter().all(|w| w.len() <= MAX_STOP_WORD_BYTES));
        assert!(STOP_WORDS.is_sorted());
        assert!(PACKED_STOP_WORDS.is_sorted());
    }

    #[test]
    fn stop_words_are_exactly_the_list() {
        for word in STOP_WORDS {
            assert!(is_stop_word(word), "{word}");
        }
        for word in [
            "", "ab", "thee", "tho", "them", "x", "ands", "wills", "théir",
        ] {
            assert!(!is_stop_word(word), "{word}");
        }
    }

    #[test]
    fn punctuation_and_symbols_are_separators() {
        let mut a = analyzer();
        assert_eq!(
            terms(&mut a, "\"raft\": (AND) OR -leader [x]"),
            ["raft", "leader", "x"]
        );
    }
}
